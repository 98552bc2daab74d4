// SPDX-License-Identifier: Apache-2.0
// The verdict on hand-built step tables: which category it names, how sure
// it is, the straggler, CPU-only wording, and incomplete windows.
#include <catch2/catch.hpp>

#include "attribution/verdict.h"

using namespace steptrace;

namespace {

constexpr uint64_t kMs = 1'000'000;

// A rank with `n` steps of 100 ms, each split as `ns` says (the rest: other).
RankResult rank_of(int rank, int n, const CategoryNs& ns, StepSource src = StepSource::runtime_probes) {
  RankResult r;
  r.rank = rank;
  r.pid = 100 + static_cast<uint32_t>(rank);
  r.main_tid = r.pid;
  r.source = src;
  for (int k = 0; k < n; ++k) {
    StepResult st;
    st.index = k;
    st.start_ns = static_cast<uint64_t>(k) * 100 * kMs;
    st.end_ns = st.start_ns + 100 * kMs;
    st.ns = ns;
    r.steps.push_back(st);
    if (k >= 1) {
      ++r.counted_steps;
      for (size_t c = 0; c < kCategories; ++c) r.total[c] += ns[c];
    }
  }
  r.steps_total = r.steps.size();
  return r;
}

CategoryNs split(std::initializer_list<std::pair<Category, uint64_t>> parts) {
  CategoryNs ns{};
  for (const auto& [c, v] : parts) ns[static_cast<size_t>(c)] = v;
  return ns;
}

void set_shares(JobAnalysis& job) {
  std::array<uint64_t, kCategories> sum{};
  uint64_t total = 0;
  for (const auto& r : job.ranks)
    for (const auto& st : r.steps) {
      if (st.index < job.skipped_warmup_steps) continue;
      for (size_t c = 0; c < kCategories; ++c) sum[c] += st.ns[c];
      total += st.duration();
    }
  for (size_t c = 0; c < kCategories; ++c)
    job.mean_share[c] = total ? static_cast<double>(sum[c]) / static_cast<double>(total) : 0;
}

}  // namespace

TEST_CASE("verdict: no ranks means no steps found", "[verdict][unit]") {
  JobAnalysis job;
  TimelineStore tl;
  DropStats drops;
  Verdict v = decide_verdict(job, tl, drops);
  CHECK(v.category == Category::other);
  CHECK(v.headline.rfind("no training steps found", 0) == 0);
  CHECK_FALSE(v.incomplete);
}

TEST_CASE("verdict: the largest share names the category, confidence against the runner-up", "[verdict][unit]") {
  JobAnalysis job;
  auto ns = split({{Category::data_loading, 60 * kMs}, {Category::device_execute, 30 * kMs},
                   {Category::host_overhead, 10 * kMs}});
  job.ranks.push_back(rank_of(0, 5, ns));
  job.ranks.push_back(rank_of(1, 5, ns));
  set_shares(job);
  TimelineStore tl;
  DropStats drops;
  Verdict v = decide_verdict(job, tl, drops);
  CHECK(v.category == Category::data_loading);
  CHECK(v.confidence == Approx(60.0 / 90.0));
  CHECK(v.headline.rfind("data loading gates the accelerator: the main thread waits 60.0 ms per 100.0 ms step", 0) ==
        0);
  CHECK(v.recommendation.find("DataLoader workers") != std::string::npos);
  CHECK(v.straggler_rank == -1);  // nobody arrived last
  REQUIRE(v.evidence.size() >= 2);
  CHECK(v.evidence[0].find("2 rank(s), steps from runtime probes (nrt_execute)") != std::string::npos);
  CHECK(v.evidence[1].find("runner-up: device_execute at 30%") != std::string::npos);
}

TEST_CASE("verdict: a rank last at the collective in most steps is the straggler, with its own cause",
          "[verdict][unit]") {
  JobAnalysis job;
  job.ranks.push_back(rank_of(0, 4, split({{Category::collective, 70 * kMs}, {Category::host_overhead, 30 * kMs}})));
  job.ranks.push_back(rank_of(1, 4,
                              split({{Category::collective, 40 * kMs}, {Category::cpu_contention, 35 * kMs},
                                     {Category::host_overhead, 25 * kMs}})));
  job.ranks[1].straggler_steps = 3;  // of 3 counted steps
  for (auto& st : job.ranks[1].steps) st.late_ns = 2 * kMs;
  set_shares(job);
  TimelineStore tl;
  DropStats drops;
  Verdict v = decide_verdict(job, tl, drops);
  CHECK(v.category == Category::collective);
  CHECK(v.straggler_rank == 1);
  CHECK(v.straggler_late_ns == 2 * kMs);
  CHECK(v.straggler_cause == Category::cpu_contention);
  // The straggler and its own cause first, then what the others pay; advice aimed at that rank's cause.
  CHECK(v.headline.rfind("rank 1 holds the collective back: it arrives 2.0 ms late (cpu_contention on that rank); "
                         "collectives gate the accelerator",
                         0) == 0);
  CHECK(v.recommendation.rfind("give rank 1's threads their own CPUs", 0) == 0);
  CHECK(v.recommendation.find("the network is not where to start") != std::string::npos);

  SECTION("last in half the steps or fewer is no straggler") {
    job.ranks[1].straggler_steps = 1;
    Verdict w = decide_verdict(job, tl, drops);
    CHECK(w.straggler_rank == -1);
    CHECK(w.headline.find("arrives") == std::string::npos);
    CHECK(w.recommendation.rfind("check the network path", 0) == 0);
  }

  SECTION("a CPU-only job's straggler: no accelerator in the headline, the straggler still first") {
    for (auto& r : job.ranks) r.source = StepSource::automatic_host;
    for (auto& st : job.ranks[1].steps) st.late_ns = 2 * kMs;
    Verdict w = decide_verdict(job, tl, drops);
    CHECK(w.headline.rfind("CPU-only job (no accelerator seen): rank 1 holds the collective back", 0) == 0);
    CHECK(w.headline.find("collectives dominate the step") != std::string::npos);
    CHECK(w.headline.find("accelerator:") == std::string::npos);
  }
}

TEST_CASE("verdict: a CPU-only job calls host compute the step", "[verdict][unit]") {
  JobAnalysis job;
  auto ns = split({{Category::host_overhead, 80 * kMs}, {Category::collective, 20 * kMs}});
  job.ranks.push_back(rank_of(0, 4, ns, StepSource::automatic_host));
  set_shares(job);
  TimelineStore tl;
  DropStats drops;
  Verdict v = decide_verdict(job, tl, drops);
  CHECK(v.category == Category::host_overhead);
  CHECK(v.headline.rfind("CPU-only job (no accelerator seen): host code dominates the step", 0) == 0);
  CHECK(v.headline.find("(forward, backward, optimizer)") != std::string::npos);
  CHECK(v.recommendation.rfind("profile the training loop on the CPU", 0) == 0);
}

TEST_CASE("verdict: dropped events mark the window incomplete and lower the confidence", "[verdict][unit]") {
  JobAnalysis job;
  auto ns = split({{Category::device_execute, 75 * kMs}, {Category::host_overhead, 25 * kMs}});
  job.ranks.push_back(rank_of(0, 4, ns));
  set_shares(job);
  TimelineStore tl;
  DropStats clean;
  Verdict full = decide_verdict(job, tl, clean);
  DropStats drops;
  drops.dropped[ST_EV_SCHED_SWITCH] = 10;
  Verdict v = decide_verdict(job, tl, drops);
  CHECK_FALSE(full.incomplete);
  CHECK(v.incomplete);
  CHECK(v.category == Category::device_execute);
  CHECK(v.confidence == Approx(full.confidence * 0.8));
  CHECK(v.evidence.back().rfind("INCOMPLETE: the kernel dropped 10 events", 0) == 0);
}

TEST_CASE("verdict: a straggler's cause is what it spends more on than the others, and it leads a CPU-only headline",
          "[verdict][unit]") {
  // Both ranks compute most of each step; rank 1 also waits 25 ms for its
  // batches and arrives 30 ms late, rank 0 waits for it in the all-reduce.
  JobAnalysis job;
  job.ranks.push_back(rank_of(0, 4, split({{Category::host_overhead, 60 * kMs}, {Category::collective, 40 * kMs}}),
                              StepSource::automatic_host));
  job.ranks.push_back(rank_of(1, 4,
                              split({{Category::host_overhead, 65 * kMs}, {Category::data_loading, 25 * kMs},
                                     {Category::collective, 10 * kMs}}),
                              StepSource::automatic_host));
  job.ranks[1].straggler_steps = 3;
  for (auto& st : job.ranks[1].steps) st.late_ns = 30 * kMs;
  set_shares(job);
  TimelineStore tl;
  DropStats drops;
  Verdict v = decide_verdict(job, tl, drops);
  CHECK(v.category == Category::host_overhead);
  CHECK(v.straggler_rank == 1);
  CHECK(v.straggler_cause == Category::data_loading);  // not host_overhead, its largest cost (+5 pp only)
  CHECK(v.headline.rfind("CPU-only job (no accelerator seen): rank 1 holds the collective back: it arrives 30.0 ms "
                         "late (data_loading on that rank); host code dominates the step",
                         0) == 0);
  CHECK(v.recommendation.rfind("feed rank 1 faster", 0) == 0);
  bool line = false;
  for (const auto& e : v.evidence) line = line || e.find("it spends 25 pp more of its step in data_loading") != std::string::npos;
  CHECK(line);

  SECTION("a lateness under a tenth of the step leaves the headline to what gates the step") {
    for (auto& st : job.ranks[1].steps) st.late_ns = 5 * kMs;
    Verdict w = decide_verdict(job, tl, drops);
    CHECK(w.straggler_rank == 1);
    CHECK(w.headline.rfind("CPU-only job (no accelerator seen): host code dominates the step", 0) == 0);
    CHECK(w.recommendation.rfind("profile the training loop on the CPU", 0) == 0);
  }
}

TEST_CASE("verdict: a rank late in every other step, by far more than the other, is the straggler",
          "[verdict][unit]") {
  // A DataLoader with two workers on slow storage: rank 1 is 60 ms late in
  // the even steps of 100 ms, rank 0 5 ms late in the odd ones. Each is last
  // in half the counted steps; rank 0 waits for rank 1 in the collective
  // (60 ms in every other step) far more than rank 1 waits for it.
  JobAnalysis job;
  job.ranks.push_back(rank_of(0, 9, split({{Category::host_overhead, 35 * kMs}, {Category::collective, 65 * kMs}})));
  job.ranks.push_back(rank_of(1, 9, split({{Category::host_overhead, 60 * kMs}, {Category::collective, 40 * kMs}})));
  job.skipped_warmup_steps = 1;
  auto set_late = [&](uint64_t even_ms, uint64_t odd_ms) {
    for (int k = 1; k < 9; ++k) {
      auto& late = job.ranks[static_cast<size_t>(k % 2 == 0 ? 1 : 0)].steps[static_cast<size_t>(k)];
      late.straggler = true;
      late.late_ns = (k % 2 == 0 ? even_ms : odd_ms) * kMs;
    }
  };
  job.ranks[0].straggler_steps = 4;
  job.ranks[1].straggler_steps = 4;
  set_shares(job);
  TimelineStore tl;
  DropStats drops;
  set_late(60, 5);
  Verdict v = decide_verdict(job, tl, drops);
  CHECK(v.straggler_rank == 1);
  CHECK(v.straggler_late_ns == 30 * kMs);  // over all its counted steps
  set_late(5, 5);  // alike on both sides
  CHECK(decide_verdict(job, tl, drops).straggler_rank == -1);
  set_late(15, 1);  // 7.5 ms per counted step: under a tenth of the step
  CHECK(decide_verdict(job, tl, drops).straggler_rank == -1);
}

// A rank last in most steps is named only when the other ranks wait for it:
// they spend kMinPeersWait (5 pp) more of their step in the collective than
// it does. Ranks that wait alike are late by chance (a symmetric job).
TEST_CASE("verdict: a rank last in most steps is no straggler when the others wait no more than it does",
          "[verdict][unit]") {
  auto job_with = [](uint64_t coll0_ms, uint64_t coll1_ms) {
    JobAnalysis job;
    job.ranks.push_back(
        rank_of(0, 9, split({{Category::host_overhead, (100 - coll0_ms) * kMs}, {Category::collective, coll0_ms * kMs}})));
    job.ranks.push_back(
        rank_of(1, 9, split({{Category::host_overhead, (100 - coll1_ms) * kMs}, {Category::collective, coll1_ms * kMs}})));
    job.skipped_warmup_steps = 1;
    for (int k = 1; k < 9; ++k) {  // rank 1 last, 12 ms late, in 6 of 8 steps; rank 0 2 ms in the rest
      const bool one = k <= 6;
      auto& late = job.ranks[one ? 1u : 0u].steps[static_cast<size_t>(k)];
      late.straggler = true;
      late.late_ns = (one ? 12 : 2) * kMs;
    }
    job.ranks[0].straggler_steps = 2;
    job.ranks[1].straggler_steps = 6;
    set_shares(job);
    return job;
  };
  TimelineStore tl;
  DropStats drops;
  CHECK(decide_verdict(job_with(39, 30), tl, drops).straggler_rank == 1);  // rank 0 waits 9 pp more
  CHECK(decide_verdict(job_with(31, 30), tl, drops).straggler_rank == -1);  // 1 pp: alike
  CHECK(decide_verdict(job_with(30, 31), tl, drops).straggler_rank == -1);
}
