// SPDX-License-Identifier: Apache-2.0
#include "attribution/job_analysis.h"

#include "attribution/cross_rank.h"
#include "attribution/device_signal_pass.h"
#include "attribution/step_attribution.h"
#include "attribution/verdict.h"

namespace steptrace {

namespace {

// Each step's gating category; each rank's and the job's totals and shares
// over counted steps (from `skip` on).
void gate_and_share(std::vector<RankWork>& ranks, int skip, JobAnalysis& job) {
  std::array<uint64_t, kCategories> sum{};
  uint64_t total = 0;
  for (auto& r : ranks) {
    for (auto& st : r.res.steps) {
      size_t g = 0;
      for (size_t c = 1; c < kCategories; ++c)
        if (st.ns[c] > st.ns[g]) g = c;
      st.gating = static_cast<Category>(g);
      if (st.index < skip) continue;
      for (size_t c = 0; c < kCategories; ++c) {
        r.res.total[c] += st.ns[c];
        sum[c] += st.ns[c];
      }
      r.res.counted_ns += st.duration();
      total += st.duration();
    }
  }
  for (size_t c = 0; c < kCategories; ++c)
    job.mean_share[c] = total ? static_cast<double>(sum[c]) / static_cast<double>(total) : 0;
}

// A rank's result shell from the steps stage: identity, loaders, and one
// unattributed StepResult per step.
RankWork start_rank(const steps::RankSteps& s) {
  RankWork w;
  w.steps = &s;
  w.res.rank = s.rank;
  w.res.pid = s.pid;
  w.res.main_tid = s.main_tid;
  w.res.comm = s.comm;
  w.res.source = s.source;
  w.res.loader_pids = s.loader_pids;
  w.res.loader_tids = s.loader_tids;
  for (const auto& win : s.steps) {
    StepResult st;
    st.index = static_cast<int>(w.res.steps.size());
    st.start_ns = win.start_ns;
    st.end_ns = win.end_ns;
    w.res.steps.push_back(st);
  }
  return w;
}

std::vector<RankResult*> results_of(std::vector<RankWork>& ranks) {
  std::vector<RankResult*> rr;
  for (auto& r : ranks) rr.push_back(&r.res);
  return rr;
}

}  // namespace

JobAnalysis analyze_job(const TimelineStore& tl, const ThreadTable& threads, const DropStats& drops,
                        const AnalysisOptions& opt) {
  JobAnalysis job;
  job.skipped_warmup_steps = opt.skip_warmup_steps;

  // The steps stage: ranks (processes that drive the accelerator, mark
  // steps, or move a periodic collective) and their steps.
  const std::vector<steps::RankSteps> found = steps::reconstruct_steps(tl, threads);
  std::vector<RankWork> ranks;
  for (const auto& s : found) ranks.push_back(start_rank(s));

  for (auto& r : ranks) {
    const uint64_t typical_device_ns = estimate_device_ns(*r.steps->main, r.steps->anchors);
    for (auto& st : r.res.steps) attribute_step(*r.steps, typical_device_ns, st);
  }
  {
    // Device counters (NDS) split device execute into compute and collective;
    // without them, the cross-rank arrival skew is the estimate.
    std::vector<RankResult*> rr = results_of(ranks);
    if (!apply_device_signals(rr, tl, threads, opt.device_signals, opt.skip_warmup_steps, &job.signals))
      apply_device_skew(ranks);
  }
  cross_rank(ranks, opt.skip_warmup_steps);
  {
    std::vector<RankResult*> rr = results_of(ranks);
    job.fabric = summarize_fabric(tl, rr, opt.skip_warmup_steps);
  }

  // Shares over counted steps; per-step gating.
  gate_and_share(ranks, opt.skip_warmup_steps, job);
  for (auto& r : ranks) job.ranks.push_back(std::move(r.res));
  job.verdict = decide_verdict(job, tl, drops);
  annotate_verdict_with_signals(job);
  return job;
}

}  // namespace steptrace
