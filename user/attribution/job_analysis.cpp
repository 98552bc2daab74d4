// SPDX-License-Identifier: Apache-2.0
#include "attribution/job_analysis.h"

#include <algorithm>
#include <cstdint>

#include "attribution/cross_rank.h"
#include "attribution/device_signal_pass.h"
#include "attribution/step_attribution.h"
#include "attribution/verdict.h"
#include "attribution/what_if.h"

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
      ++r.res.counted_steps;
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
RankWork start_rank(const steps::RankSteps& s, int first_index) {
  RankWork w;
  w.steps = &s;
  w.res.rank = s.rank;
  w.res.pid = s.pid;
  w.res.main_tid = s.main_tid;
  w.res.comm = s.comm;
  w.res.source = s.source;
  w.res.loader_pids = s.loader_pids;
  w.res.loader_tids = s.loader_tids;
  w.res.host_only = s.host_only;
  w.res.burst = s.burst;
  for (const auto& win : s.steps) {
    StepResult st;
    st.index = first_index + static_cast<int>(w.res.steps.size());
    st.start_ns = win.start_ns;
    st.end_ns = win.end_ns;
    w.res.steps.push_back(st);
  }
  w.res.steps_total = w.res.steps.size();
  return w;
}

// Leave out the steps a windowed analysis folded already (those mostly
// before the cut); the first one left starts at the cut, so the rank's steps
// stay contiguous across windows. Executions before it go too: ranks are
// compared execution by execution.
void resume_at(steps::RankSteps& s, const ResumePoint& p) {
  auto& v = s.steps;
  auto first = std::find_if(v.begin(), v.end(), [&](const steps::StepWindow& w) {
    return w.start_ns / 2 + w.end_ns / 2 >= p.cut_ns;
  });
  v.erase(v.begin(), first);
  if (!v.empty() && (v.front().start_ns < p.cut_ns ||
                     v.front().start_ns - p.cut_ns < v.front().end_ns - v.front().start_ns))
    v.front().start_ns = p.cut_ns;
  const uint64_t from = v.empty() ? p.cut_ns : v.front().start_ns;
  auto& a = s.anchors;
  a.erase(a.begin(), std::find_if(a.begin(), a.end(), [&](const steps::Anchor& x) { return x.start >= from; }));
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
  std::map<uint32_t, steps::BurstModel> known;
  for (const auto& [pid, p] : opt.resume)
    if (p.burst.known()) known[pid] = p.burst;
  std::vector<steps::RankSteps> found = steps::reconstruct_steps(tl, threads, known);
  std::vector<RankWork> ranks;
  FabricWindow fw;
  fw.others_from_ns = opt.others_from_ns;
  for (auto& s : found) {
    int first_index = 0;
    if (auto it = opt.resume.find(s.pid); it != opt.resume.end()) {
      resume_at(s, it->second);
      first_index = it->second.next_index;
      fw.rank_range[s.pid] = {it->second.cut_ns, UINT64_MAX};
    }
    ranks.push_back(start_rank(s, first_index));
  }
  if (opt.steps_only) {
    for (auto& r : ranks) job.ranks.push_back(std::move(r.res));
    return job;
  }

  std::vector<RankPaints> paints;
  for (auto& r : ranks) {
    const uint64_t typical_device_ns = estimate_device_ns(*r.steps->main, r.steps->anchors);
    RankPaints* rp = nullptr;
    if (opt.samples) {
      rp = &paints.emplace_back();
      rp->rank = r.steps;
    }
    for (auto& st : r.res.steps) {
      // A step's paints are kept only where a sample of the main thread
      // needs them (classify_samples): at 49 Hz most steps of a busy rank
      // have none, and keeping every step's doubled what a fold allocates.
      std::vector<Paint>* keep = nullptr;
      if (rp) {
        keep = &rp->paints.emplace_back();
        rp->steps.emplace_back(st.start_ns, st.end_ns);
        if (!has_sample_of(*opt.samples, r.res.main_tid, st.start_ns, st.end_ns)) keep = nullptr;
      }
      attribute_step(*r.steps, typical_device_ns, st, keep);
    }
    // NUMA placement: the device's node from the session's sysfs (none in a replay).
    static const signals::NumaTopology kNoTopology;
    const signals::NumaTopology& topo = opt.device_signals ? opt.device_signals->numa : kNoTopology;
    r.res.numa = place_device(*r.steps->main, topo);
    for (auto& st : r.res.steps)
      on_cpu_by_node(*r.steps->main, st.start_ns, st.end_ns, r.res.numa.device_node, topo, &st.on_cpu_ns,
                     &st.remote_node_ns);
  }
  {
    // Device counters (NDS) split device execute into compute and collective;
    // without them, the cross-rank arrival skew is the estimate.
    std::vector<RankResult*> rr = results_of(ranks);
    if (!apply_device_signals(rr, tl, threads, opt.device_signals, opt.skip_warmup_steps, opt.known_proxies,
                              &job.signals))
      apply_device_skew(ranks);
  }
  cross_rank(ranks, opt.skip_warmup_steps);
  {
    std::vector<RankResult*> rr = results_of(ranks);
    job.fabric = summarize_fabric(tl, rr, opt.skip_warmup_steps, fw);
  }

  // Shares over counted steps; per-step gating.
  gate_and_share(ranks, opt.skip_warmup_steps, job);
  if (opt.samples) job.profile.samples = classify_samples(*opt.samples, paints);
  for (auto& r : ranks) job.ranks.push_back(std::move(r.res));
  judge(job, tl, drops);
  return job;
}

void judge(JobAnalysis& job, const TimelineStore& tl, const DropStats& drops) {
  job.verdict = decide_verdict(job, tl, drops);
  annotate_verdict_with_signals(job);
  job.host_steals = summarize_host_steals(job);
  annotate_verdict_with_host_steals(job);
  job.changes = find_changes(job);
  job.what_if = what_if(job);
  annotate_verdict_with_what_if(job);
}

}  // namespace steptrace
