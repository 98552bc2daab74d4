// SPDX-License-Identifier: Apache-2.0
// [root] Accuracy against ground truth: every trainsim scenario runs under
// steptrace, and the tracer's steps, breakdown, verdict and straggler are
// compared with what the simulator recorded. Thresholds are the issue's:
// verdict right, step count exact, per-step duration error < 2 %, every
// category's share within 5 pp of the truth on average over steps.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "accuracy.h"
#include "attribution/host_steals.h"
#include "decode/event.h"
#include "export/profile_view.h"

using namespace steptrace::accuracy;

namespace {

ScenarioResult run(const std::string& scenario, std::vector<std::string> extra = {}, bool attach = false,
                   double timeout_s = 120, double attach_after_s = 0) {
  INFO("[root] tests need root: run as root");
  REQUIRE(::geteuid() == 0);
  ScenarioRun r;
  r.scenario = scenario;
  r.trainsim = TRAINSIM_BIN;
  r.extra_args = std::move(extra);
  r.attach = attach;
  r.attach_after_s = attach_after_s;
  r.timeout_s = timeout_s;
  r.keep_steps = 1'000'000;  // every step in detail: each is compared with the truth
  ScenarioResult res;
  std::string err;
  INFO(err);
  bool ok = run_scenario(r, &res, &err);
  INFO("run_scenario: " << err);
  REQUIRE(ok);
  return res;
}

// The verdict is the truth's largest category.
void check_verdict(const ScenarioResult& res) {
  if (res.tracer_verdict != res.truth_gating) {
    // Only a tie in the truth has two right answers: the straggler scenario
    // makes rank 0 wait in the collective about as long as rank 1 loads data,
    // so over both ranks the two categories differ by a fraction of a point.
    auto sh = res.truth_time_shares;
    double margin_pp = 100 * (sh[res.truth_gating] - sh[res.tracer_verdict]);
    INFO("verdict " << res.tracer_verdict << " vs truth " << res.truth_gating << ": the truth's shares differ by "
                    << margin_pp << " pp");
    CHECK(margin_pp < 1.0);
  }
}

void check_common(const ScenarioResult& res, double share_pp = 5.0) {
  INFO(res.cmp.summary());
  check_verdict(res);
  CHECK(res.cmp.step_count_match);
  CHECK(res.cmp.matched_steps == res.cmp.truth_steps);
  CHECK(res.cmp.mean_step_duration_error_pct < 2.0);
  for (const auto& [cat, err] : res.cmp.share_error_pp) {
    INFO("category " << cat);
    CHECK(err < share_pp);
  }
  std::string dropped_kinds;  // which records the kernel could not queue: a stalled drain or a storm of one kind
  for (uint32_t k = 0; k < ST_EV_KIND_MAX; ++k)
    if (res.report.drops.dropped[k])
      dropped_kinds += std::string(steptrace::kind_name(k)) + " " + std::to_string(res.report.drops.dropped[k]) + " of " +
                       std::to_string(res.report.drops.emitted[k]) + "; ";
  INFO("incomplete: [" << incomplete_reason(res.report.drops) << "] dropped [" << dropped_kinds << "] capture end [" << res.report.capture_end
                        << "] windows forgotten at the memory cap " << res.report.windows.memory_cap_forgets
                        << "; records " << res.report.records << ", late " << res.report.late_records);
  CHECK_FALSE(res.report.incomplete());
  // None of the host's steals is planted in these scenarios: none is named.
  for (const auto& f : res.report.job.host_steals.findings) {
    INFO("host steal named on a healthy run: " << f.text);
    CHECK(false);
  }
}

// Per rank, a host steal's share of the steps after the first: the truth's
// (its own counters at step boundaries) and the tracer's (its counted steps).
struct StealShares {
  int rank = 0;
  double truth = 0, tracer = 0;
};
template <typename TruthField, typename TracerField>
std::vector<StealShares> steal_shares(const ScenarioResult& res, TruthField truth_ns, TracerField tracer_ns) {
  std::vector<StealShares> out;
  const auto& job = res.report.job;
  for (const auto& tr : res.truth.rank_data) {
    StealShares s;
    s.rank = tr.rank;
    double t = 0, td = 0, c = 0, cd = 0;
    for (size_t i = 1; i < tr.steps.size(); ++i) {
      t += static_cast<double>(truth_ns(tr.steps[i]));
      td += static_cast<double>(tr.steps[i].end_ns - tr.steps[i].start_ns);
    }
    for (const auto& rr : job.ranks) {
      if (static_cast<int>(rr.pid) != tr.pid) continue;
      for (const auto& st : rr.steps) {
        if (st.index < job.skipped_warmup_steps) continue;
        c += static_cast<double>(tracer_ns(st));
        cd += static_cast<double>(st.duration());
      }
    }
    s.truth = td > 0 ? 100 * t / td : 0;
    s.tracer = cd > 0 ? 100 * c / cd : -100;  // no tracer rank: fails the comparison
    out.push_back(s);
  }
  return out;
}

void check_steal_shares(const std::vector<StealShares>& v, double min_truth_pct) {
  REQUIRE_FALSE(v.empty());
  for (const auto& s : v) {
    INFO("rank " << s.rank << ": truth " << s.truth << " % of the step, tracer " << s.tracer << " %");
    CHECK(s.truth >= min_truth_pct);  // the cause was planted
    CHECK(std::abs(s.tracer - s.truth) < 5.0);
  }
}

const steptrace::StealFinding* named(const ScenarioResult& res, steptrace::StealCause c) {
  for (const auto& f : res.report.job.host_steals.findings)
    if (f.cause == c) return &f;
  return nullptr;
}

// Scenarios without any collective: the ranks are not coupled, so no rank
// can hold the others back and none may be named a straggler.
void check_no_straggler(const ScenarioResult& res) {
  CHECK(res.truth_straggler == -1);
  CHECK(res.report.job.verdict.straggler_rank == -1);
}

}  // namespace

TEST_CASE("accuracy: compute-bound", "[root][accuracy]") {
  auto res = run("compute-bound");
  CHECK(res.truth_gating == "device_execute");
  check_common(res);
}

TEST_CASE("accuracy: data-bound", "[root][accuracy]") {
  auto res = run("data-bound");
  check_no_straggler(res);
  CHECK(res.truth_gating == "data_loading");
  check_common(res);
}

TEST_CASE("accuracy: dma-bound", "[root][accuracy]") {
  auto res = run("dma-bound");
  check_no_straggler(res);
  CHECK(res.truth_gating == "dma_submission");
  check_common(res);
}

TEST_CASE("accuracy: collective-bound", "[root][accuracy]") {
  auto res = run("collective-bound");
  CHECK(res.truth_gating == "collective");
  check_common(res);
}

TEST_CASE("accuracy: straggler is named, with its cause", "[root][accuracy]") {
  auto res = run("straggler");
  check_common(res);
  CHECK(res.truth_straggler >= 0);
  CHECK(res.tracer_straggler_pid_rank == res.truth_straggler);
  CHECK(std::string(steptrace::category_name(res.report.job.verdict.straggler_cause)) == "data_loading");
}

TEST_CASE("accuracy: host-bound", "[root][accuracy]") {
  auto res = run("host-bound");
  check_no_straggler(res);
  CHECK(res.truth_gating == "host_overhead");
  check_common(res);
}

TEST_CASE("accuracy: contention", "[root][accuracy]") {
  auto res = run("contention");
  CHECK(res.truth_gating == "cpu_contention");
  // Inside nrt_execute the kernel cannot see when the device finished: the
  // finish inside a long wait for a CPU is estimated from the bounds that
  // all executions give (job_analysis.cpp, estimate_device_ns).
  check_common(res);
}

TEST_CASE("accuracy: more ranks and fewer loaders still give exact steps", "[root][accuracy]") {
  auto res = run("data-bound", {"--ranks", "3", "--steps", "12"});
  CHECK(res.truth_gating == "data_loading");
  check_common(res);
  CHECK(res.report.job.ranks.size() == 3);
}

// Long sessions (issue 15): three minutes of a busy job, analysed in windows
// of 10 s (the default), so the ledger folds ~18 times; every step is still
// found and split as in a short run. compute-bound makes ~6 M records in two
// minutes here, past where a 32-bit rank score once overflowed and the ranks
// vanished.
TEST_CASE("accuracy: three minutes of a compute-bound job under run find every step", "[root][accuracy]") {
  auto res = run("compute-bound", {"--duration", "180"}, false, 240);
  INFO(res.cmp.summary());
  CHECK(res.report.windows.folds >= 12);
  CHECK(res.report.windows.memory_cap_forgets == 0);
  CHECK(res.truth_gating == "device_execute");
  CHECK(res.cmp.truth_steps >= 1000);
  check_common(res);
}

// The attach's common start: a launcher execs the job while traced. The new
// image's maps are read at once (its exec wakes the drain) and again 20 ms
// later, so its runtime is probed before the ranks' first step (~170 ms
// after the exec here). A drain interval late, one to three first steps
// went unseen.
TEST_CASE("accuracy: a job started by an exec under attach has its runtime probed before its first step", "[root][accuracy]") {
  auto res = run("data-bound", {"--duration", "3"}, true, 60);
  REQUIRE(res.truth.rank_data.size() == 2);
  REQUIRE(res.report.job.ranks.size() == 2);
  for (size_t i = 0; i < res.truth.rank_data.size(); ++i) {
    const auto& t = res.truth.rank_data[i];
    const auto* traced = &res.report.job.ranks[0];
    for (const auto& rr : res.report.job.ranks)
      if (static_cast<int>(rr.pid) == t.pid) traced = &rr;
    REQUIRE(static_cast<int>(traced->pid) == t.pid);
    REQUIRE(!t.steps.empty());
    REQUIRE(!traced->steps.empty());
    const double late_ms =
        (static_cast<double>(traced->steps.front().start_ns) - static_cast<double>(t.steps.front().start_ns)) / 1e6;
    INFO("rank " << i << ": the first traced step starts " << late_ms << " ms after the truth's; steps "
                 << traced->steps.size() << " of " << t.steps.size());
    CHECK(std::abs(late_ms) < 5.0);
    CHECK(traced->steps.size() == t.steps.size());
  }
}

TEST_CASE("accuracy: three minutes of a data-bound job under attach find every step", "[root][accuracy]") {
  // The job starts 4 s after the attach (accuracy.h) and runs 180 s; the
  // session ends when it exits. The limit leaves room for a loaded host: with
  // a build beside it one rank's last step ended 186.5 s after its first,
  // and a 190 s limit cut its last 7 steps.
  auto res = run("data-bound", {"--duration", "180"}, true, 240);
  INFO(res.cmp.summary());
  // Where a step count is off, say whether tracing began late or ended early.
  std::string span;
  for (size_t i = 0; i < res.truth.rank_data.size() && i < res.report.job.ranks.size(); ++i) {
    const auto& t = res.truth.rank_data[i].steps;
    const auto& s = res.report.job.ranks[i].steps;
    if (!t.empty() && !s.empty())
      span += "rank " + std::to_string(i) + ": truth steps " + std::to_string(t.front().start_ns) + ".." +
              std::to_string(t.back().end_ns) + ", traced " + std::to_string(s.front().start_ns) + ".." +
              std::to_string(s.back().end_ns) + "\n";
  }
  INFO(span);
  CHECK(res.report.windows.folds >= 12);
  CHECK(res.truth_gating == "data_loading");
  CHECK(res.cmp.truth_steps >= 300);
  check_common(res);
}

// The SRE's usual case (issue 20): the job has run for 3 s when steptrace
// attaches to its launcher, so its ranks and their loader workers were forked
// before tracing began. Their parents come from /proc; before, the loaders
// went unrecognised and data-bound was judged "unexplained time" (83 %
// other). The straggler's cause is its loaders: it must be named too.
TEST_CASE("accuracy: data-bound attached 3 s after it started reaches run's verdict", "[root][accuracy]") {
  auto res = run("data-bound", {"--duration", "10"}, false, 60, 3.0);
  CHECK(res.truth_gating == "data_loading");
  CHECK(res.cmp.truth_steps >= 100);
  check_common(res, 3.0);
}

TEST_CASE("accuracy: a straggler attached 3 s after it started is named, with its cause", "[root][accuracy]") {
  auto res = run("straggler", {"--duration", "10"}, false, 60, 3.0);
  CHECK(res.truth_straggler >= 0);
  CHECK(res.tracer_straggler_pid_rank == res.truth_straggler);
  CHECK(std::string(steptrace::category_name(res.report.job.verdict.straggler_cause)) == "data_loading");
  check_common(res, 3.0);
}

// Host steals (issue 21): each planted cause measured per step within 5 pp
// of the truth's share, and named in the verdict with its knob. The healthy
// scenarios above name none (check_common).
TEST_CASE("accuracy: a cgroup CPU quota on the main threads is measured and named", "[root][accuracy][steals]") {
  auto res = run("throttled");
  INFO(res.cmp.summary());
  CHECK(res.cmp.step_count_match);
  INFO("verdict: " << res.report.job.verdict.headline);
  // All of the main thread's waits for the quota against the cgroup's own
  // throttled time (the thread is the group's only task).
  check_steal_shares(steal_shares(res, [](const auto& st) { return st.throttled_ns; },
                                  [](const auto& st) { return st.throttled_wait_ns; }),
                     10.0);
  const auto* f = named(res, steptrace::StealCause::cpu_throttling);
  REQUIRE(f != nullptr);
  // Named on the ranks whose steps the quota lengthened. Each rank's quota
  // period runs at its own phase against the steps: a rank throttled while
  // its device works, then waiting in the all-reduce for a rank throttled on
  // its critical path, loses little to it (CI: rank 0 2.0 % cpu_contention in
  // the truth, rank 1 32.8 %; only rank 1 named, rightly). So: every rank
  // whose truth puts a tenth of the step in cpu_contention is named.
  for (const auto& tr : res.truth.rank_data) {
    double contention = 0, dur = 0;
    for (size_t i = 1; i < tr.steps.size(); ++i) {
      const auto& st = tr.steps[i];
      if (auto it = st.breakdown.find("cpu_contention"); it != st.breakdown.end())
        contention += static_cast<double>(it->second);
      dur += static_cast<double>(st.end_ns - st.start_ns);
    }
    const double share = dur > 0 ? contention / dur : 0;
    INFO("rank " << tr.rank << ": truth cpu_contention " << 100 * share << " % of the step");
    if (share >= 0.10) CHECK(std::find(f->ranks.begin(), f->ranks.end(), tr.rank) != f->ranks.end());
  }
  CHECK(res.report.job.verdict.headline.find("CPU quota") != std::string::npos);
  CHECK(res.report.job.verdict.recommendation.find("cpu.max") != std::string::npos);
}

TEST_CASE("accuracy: loaders reclaiming at their cgroup's memory limit are measured and named",
          "[root][accuracy][steals]") {
  auto res = run("memory-pressure");
  INFO(res.cmp.summary());
  CHECK(res.cmp.step_count_match);
  // The reclaim's bite varies with the host: with 5 ms of device time per
  // step, data loading was 19-50 % of the step by the truth, and on some
  // hosts the device's share was within 3 pp of it. The scenario now runs
  // 2 ms on the device (data loading 42-57 %, device 18-23 % here). The
  // verdict is the truth's, whichever it is; the reclaim is named (below)
  // either way, and leads the verdict where it gates.
  check_verdict(res);
  INFO("verdict: " << res.report.job.verdict.headline);
  // The loaders' reclaim passes against their memory PSI (each loader alone
  // in its group): memstall is reclaim plus refaults, mostly reclaim here.
  check_steal_shares(steal_shares(res, [](const auto& st) { return st.loader_memstall_ns; },
                                  [](const auto& st) { return st.loader_reclaim_ns; }),
                     3.0);
  REQUIRE(named(res, steptrace::StealCause::loader_reclaim) != nullptr);
  if (res.truth_gating == "data_loading") {
    CHECK(res.report.job.verdict.headline.find("memory reclaim") != std::string::npos);
    CHECK(res.report.job.verdict.recommendation.find("memory.high") != std::string::npos);
  }
}

TEST_CASE("accuracy: receive softirqs on the main thread's CPU are measured and named", "[root][accuracy][steals]") {
  auto res = run("softirq");
  INFO(res.cmp.summary());
  CHECK(res.cmp.step_count_match);
  INFO("verdict: " << res.report.job.verdict.headline);
  check_steal_shares(steal_shares(res, [](const auto& st) { return st.softirq_ns; },
                                  [](const auto& st) { return st.softirq_ns; }),
                     3.0);
  const auto* f = named(res, steptrace::StealCause::interrupts);
  REQUIRE(f != nullptr);
  CHECK(f->text.find("NET_RX") != std::string::npos);
  CHECK(res.report.job.verdict.headline.find("interrupt handlers") != std::string::npos);
}

namespace {

// Of the samples in one (category, role) group whose stack holds function a
// or b, the share that holds a (inclusive: a caller of both counts in both).
struct Split {
  double share = -1;
  uint64_t samples = 0;
};
Split sampled_split(const std::vector<steptrace::NamedStack>& stacks, steptrace::Category c, steptrace::SampleRole role,
                    const std::string& a, const std::string& b) {
  uint64_t na = 0, nb = 0;
  for (const auto& s : stacks) {
    if (s.category != c || s.role != role) continue;
    bool has_a = false, has_b = false;
    for (const auto& f : s.frames) {
      has_a = has_a || f == a;
      has_b = has_b || f == b;
    }
    if (has_a) na += s.samples;
    if (has_b) nb += s.samples;
  }
  if (na + nb == 0) return {};
  return {static_cast<double>(na) / static_cast<double>(na + nb), na + nb};
}

double truth_split(const ScenarioResult& res, const std::string& a, const std::string& b) {
  double ta = 0, tb = 0;
  for (const auto& r : res.truth.rank_data) {
    if (auto it = r.cpu_functions.find(a); it != r.cpu_functions.end()) ta += static_cast<double>(it->second);
    if (auto it = r.cpu_functions.find(b); it != r.cpu_functions.end()) tb += static_cast<double>(it->second);
  }
  return ta + tb > 0 ? ta / (ta + tb) : -1;
}

void check_split(const ScenarioResult& res, steptrace::Category c, steptrace::SampleRole role, const std::string& a,
                 const std::string& b) {
  const auto stacks = steptrace::named_stacks(res.report);
  INFO(steptrace::profile_text(res.report, stacks));
  const Split got = sampled_split(stacks, c, role, a, b);
  const double want = truth_split(res, a, b);
  INFO(a << " vs " << b << ": samples " << got.samples << ", sampled share " << got.share << ", truth " << want);
  REQUIRE(want > 0);
  CHECK(got.samples >= 300);  // enough for a 5 pp bound (binomial sd ~ 2.8 pp at 300)
  CHECK(std::abs(got.share - want) * 100 < 5.0);
  // Both are among the group's named top functions: the frames were symbolized.
  bool fa = false, fb = false;
  for (const auto& f : steptrace::top_functions(stacks, c, role, 10)) {
    fa = fa || f.function == a;
    fb = fb || f.function == b;
  }
  CHECK(fa);
  CHECK(fb);
}

ScenarioResult run_sampled(const std::string& scenario, uint32_t hz) {
  REQUIRE(::geteuid() == 0);
  ScenarioRun r;
  r.scenario = scenario;
  r.trainsim = TRAINSIM_BIN;
  r.sample_hz = hz;
  ScenarioResult res;
  std::string err;
  bool ok = run_scenario(r, &res, &err);
  INFO("run_scenario: " << err);
  REQUIRE(ok);
  return res;
}

}  // namespace

TEST_CASE("accuracy: host-bound stack samples split the host work between its functions as the truth does",
          "[root][accuracy][stacks]") {
  auto res = run_sampled("host-bound", 499);
  CHECK(res.truth_gating == "host_overhead");
  check_split(res, steptrace::Category::host_overhead, steptrace::SampleRole::main, "ts_host_optimizer_step",
              "ts_host_bookkeeping");
}

TEST_CASE("accuracy: data-bound stack samples split the loaders' preprocessing between its functions as the truth does",
          "[root][accuracy][stacks]") {
  auto res = run_sampled("data-bound", 499);
  CHECK(res.truth_gating == "data_loading");
  check_split(res, steptrace::Category::data_loading, steptrace::SampleRole::loader, "ts_preprocess_decode",
              "ts_preprocess_augment");
}
