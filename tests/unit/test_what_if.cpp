// SPDX-License-Identifier: Apache-2.0
// What-if on hand-built step tables: the step follows the last rank to the
// collective, so removing the straggler's data loading predicts the others'
// time; a cost on a rank that is not last would not help; a single rank and
// uncoupled ranks take their own paths; slow loaders that keep ahead of the
// main thread are named off the critical path.
#include <catch2/catch.hpp>

#include <fmt/core.h>

#include <algorithm>

#include "attribution/what_if.h"
#include "export/what_if_view.h"

using namespace steptrace;

namespace {

constexpr uint64_t kMs = 1'000'000;

CategoryNs split(std::initializer_list<std::pair<Category, uint64_t>> parts) {
  CategoryNs ns{};
  for (const auto& [c, v] : parts) ns[static_cast<size_t>(c)] = v;
  return ns;
}

uint64_t sum(const CategoryNs& ns) {
  uint64_t s = 0;
  for (uint64_t v : ns) s += v;
  return s;
}

// A rank with `n` steps split as `ns` says (duration: the sum), ending
// together with every other rank built with the same step length.
RankResult rank_of(int rank, int n, const CategoryNs& ns, bool coupled) {
  RankResult r;
  r.rank = rank;
  r.pid = 100 + static_cast<uint32_t>(rank);
  r.source = StepSource::runtime_probes;
  for (int k = 0; k < n; ++k) {
    StepResult st;
    st.index = k;
    st.start_ns = static_cast<uint64_t>(k) * sum(ns);
    st.end_ns = st.start_ns + sum(ns);
    st.ns = ns;
    st.coupled = coupled;
    r.steps.push_back(st);
  }
  r.steps_total = r.steps.size();
  r.counted_steps = r.steps.size() - 1;
  return r;
}

const WhatIf* find(const WhatIfReport& w, int rank, Category c, WhatIfKind k = WhatIfKind::remove_category) {
  for (const auto& x : w.items)
    if (x.kind == k && x.rank == rank && x.category == c) return &x;
  return nullptr;
}

double ms(double ns) { return ns / 1e6; }

}  // namespace

TEST_CASE("what-if: removing the straggler's data loading predicts the other rank's path plus the transfer",
          "[what_if][unit]") {
  // Rank 1 waits for batches and arrives last; rank 0 waits for it in the
  // collective. Same step length on both (they leave the collective together).
  const uint64_t transfer = 10 * kMs, data1 = 40 * kMs;
  const CategoryNs r1 = split({{Category::data_loading, data1}, {Category::device_execute, 40 * kMs},
                               {Category::host_overhead, 12 * kMs}, {Category::collective, transfer}});
  const CategoryNs r0 = split({{Category::device_execute, 40 * kMs}, {Category::host_overhead, 12 * kMs},
                               {Category::collective, transfer + data1}});
  REQUIRE(sum(r0) == sum(r1));
  JobAnalysis job;
  job.ranks.push_back(rank_of(0, 6, r0, true));
  job.ranks.push_back(rank_of(1, 6, r1, true));
  job.verdict.straggler_rank = 1;
  const WhatIfReport w = what_if(job);
  CHECK(w.steps == 10);  // 5 counted steps on each rank
  CHECK(w.coupled_steps == 10);
  CHECK(ms(w.step_ns) == Approx(ms(static_cast<double>(sum(r0)))));

  const uint64_t own0 = sum(r0) - r0[static_cast<size_t>(Category::collective)];
  const WhatIf* dl = find(w, 1, Category::data_loading);
  REQUIRE(dl);
  CHECK(dl->helps);
  CHECK(ms(dl->predicted_step_ns) == Approx(ms(static_cast<double>(own0 + transfer))));
  CHECK(dl->reason.find("rank 1 is last at the collective in 5 of 5 steps") != std::string::npos);
  // The straggler at the median of the others: the same step.
  const WhatIf* med = nullptr;
  for (const auto& x : w.items)
    if (x.kind == WhatIfKind::straggler_to_median) med = &x;
  REQUIRE(med);
  CHECK(med->rank == 1);
  CHECK(ms(med->predicted_step_ns) == Approx(ms(dl->predicted_step_ns)));
  // The top suggestion is about the straggler; the ranking is by saving.
  REQUIRE(w.items.front().helps);
  CHECK(w.items.front().rank == 1);
  for (size_t i = 1; i < w.items.size(); ++i)
    if (w.items[i].helps) CHECK(w.items[i].saving_ns <= w.items[i - 1].saving_ns);
  // Rank 0's host work (over a tenth of its step) is off the critical path: rank 1 arrives data1 later.
  const WhatIf* host0 = find(w, 0, Category::host_overhead);
  REQUIRE(host0);
  CHECK_FALSE(host0->helps);
  CHECK(host0->saving_ns == Approx(0).margin(1));
  CHECK(host0->reason.find(fmt::format("rank 1 arrives later at the collective, by {:.1f} ms", ms(data1))) !=
        std::string::npos);

  SECTION("the verdict gets the top fix as evidence and its saving in the advice") {
    job.what_if = w;
    job.verdict.category = Category::collective;
    job.verdict.recommendation = "feed rank 1 faster";
    annotate_verdict_with_what_if(job);
    const auto& ev = job.verdict.evidence;
    CHECK(std::any_of(ev.begin(), ev.end(), [](const std::string& e) { return e.rfind("what-if: ", 0) == 0; }));
    CHECK(std::any_of(ev.begin(), ev.end(), [](const std::string& e) {
      return e.rfind("what-if: would not help: remove host_overhead on rank 0", 0) == 0;
    }));
    CHECK(job.verdict.recommendation.rfind("feed rank 1 faster (what-if: step -", 0) == 0);
  }
}

TEST_CASE("what-if: slow data loading on a rank that is not the last one would not help", "[what_if][unit]") {
  // Rank 0 waits 20 ms for batches, but rank 1's CPU contention makes it 35
  // ms later still: rank 0 only waits longer in the collective.
  const uint64_t transfer = 5 * kMs;
  const CategoryNs r0 = split({{Category::data_loading, 20 * kMs}, {Category::device_execute, 40 * kMs},
                               {Category::collective, transfer + 35 * kMs}});
  const CategoryNs r1 = split({{Category::cpu_contention, 55 * kMs}, {Category::device_execute, 40 * kMs},
                               {Category::collective, transfer}});
  REQUIRE(sum(r0) == sum(r1));
  JobAnalysis job;
  job.ranks.push_back(rank_of(0, 5, r0, true));
  job.ranks.push_back(rank_of(1, 5, r1, true));
  const WhatIfReport w = what_if(job);
  const WhatIf* dl0 = find(w, 0, Category::data_loading);
  REQUIRE(dl0);
  CHECK_FALSE(dl0->helps);
  CHECK(dl0->reason.rfind("off the critical path: rank 1 arrives later", 0) == 0);
  // Rank 1's contention is the fix, down to rank 0's own path.
  const WhatIf* c1 = find(w, 1, Category::cpu_contention);
  REQUIRE(c1);
  CHECK(c1->helps);
  CHECK(ms(c1->predicted_step_ns) == Approx(ms(static_cast<double>(60 * kMs + transfer))));
  CHECK(&w.items.front() == c1);
  // Contention on every rank does no more than on rank 1: not listed apart.
  CHECK_FALSE(find(w, -1, Category::cpu_contention));
  // The JSON and the text say the same.
  const auto j = what_if_json(w);
  bool said = false;
  for (const auto& x : j)
    if (x["rank"] == 0 && x["category"] == "data_loading") said = x["helps"] == false;
  CHECK(said);
  const WhatIfText t = what_if_text(w);
  REQUIRE_FALSE(t.lines.empty());
  CHECK(t.lines.front().rfind("1. fix: remove cpu_contention on rank 1 -> step -", 0) == 0);
  CHECK(std::any_of(t.lines.begin(), t.lines.end(), [](const std::string& l) {
    return l.rfind("would not help: remove data_loading on rank 0", 0) == 0;
  }));
}

TEST_CASE("what-if: a single rank and uncoupled ranks each take their own path", "[what_if][unit]") {
  const CategoryNs ns = split({{Category::data_loading, 30 * kMs}, {Category::device_execute, 50 * kMs},
                               {Category::dma_submission, 20 * kMs}});
  SECTION("one rank: no cross-rank part") {
    JobAnalysis job;
    job.ranks.push_back(rank_of(0, 4, ns, false));
    job.verdict.straggler_rank = 0;  // even so: no other rank to bring it to
    const WhatIfReport w = what_if(job);
    CHECK(w.coupled_steps == 0);
    const WhatIf* dl = find(w, 0, Category::data_loading);
    REQUIRE(dl);
    CHECK(dl->saving_ns == Approx(static_cast<double>(30 * kMs)));
    CHECK(dl->reason == "one rank: its step is its own path");
    for (const auto& x : w.items) {
      CHECK((x.rank != -1 || x.kind != WhatIfKind::remove_category));  // "every rank" is rank 0's
      CHECK(x.kind != WhatIfKind::straggler_to_median);
    }
    // DMA overlapped with compute hides all of it here (compute is longer).
    const WhatIf* ov = find(w, -1, Category::dma_submission, WhatIfKind::dma_overlapped);
    REQUIRE(ov);
    CHECK(ov->saving_ns == Approx(static_cast<double>(20 * kMs)));
  }
  SECTION("two ranks no collective couples: every rank's fix saves each rank's own") {
    JobAnalysis job;
    job.ranks.push_back(rank_of(0, 4, ns, false));
    job.ranks.push_back(rank_of(1, 4, ns, false));
    const WhatIfReport w = what_if(job);
    CHECK(w.coupled_steps == 0);
    const WhatIf* all = find(w, -1, Category::data_loading);
    const WhatIf* one = find(w, 0, Category::data_loading);
    REQUIRE(all);
    REQUIRE(one);
    CHECK(all->saving_ns == Approx(static_cast<double>(30 * kMs)));
    CHECK(one->saving_ns == Approx(all->saving_ns / 2));
    CHECK(w.items.front().rank == -1);
    CHECK(w.items.front().category == Category::data_loading);
  }
  SECTION("the waits for a CPU inside the copies go with them, the execution submission stays") {
    JobAnalysis job;
    CategoryNs with = ns;
    with[static_cast<size_t>(Category::cpu_contention)] = 10 * kMs;
    job.ranks.push_back(rank_of(0, 4, with, false));
    // Of the 20 ms of DMA submission, 3 ms submit the execution: that stays.
    for (auto& st : job.ranks[0].steps) {
      st.contention_under[static_cast<size_t>(Category::dma_submission)] = 8 * kMs;
      st.exec_submit_ns = 3 * kMs;
    }
    const WhatIfReport w = what_if(job);
    const WhatIf* dma = find(w, 0, Category::dma_submission);
    REQUIRE(dma);
    CHECK(dma->saving_ns == Approx(static_cast<double>(25 * kMs)));
  }
  SECTION("no counted steps: nothing to say") {
    JobAnalysis job;
    job.ranks.push_back(rank_of(0, 1, ns, false));
    const WhatIfReport w = what_if(job);
    CHECK(w.steps == 0);
    CHECK(w.items.empty());
    CHECK(what_if_text(w).title.empty());
  }
}

TEST_CASE("what-if: busy loaders that keep ahead of the main thread would not help", "[what_if][unit]") {
  const CategoryNs ns = split({{Category::data_loading, kMs / 10}, {Category::device_execute, 80 * kMs},
                               {Category::host_overhead, 20 * kMs}});
  JobAnalysis job;
  job.ranks.push_back(rank_of(0, 5, ns, false));
  job.ranks[0].loader_tids = {201, 202};
  for (auto& st : job.ranks[0].steps) st.loader_busy_ns = 45 * kMs;
  const WhatIfReport w = what_if(job);
  const WhatIf* dl = find(w, 0, Category::data_loading);
  REQUIRE(dl);
  CHECK_FALSE(dl->helps);
  CHECK(dl->reason.find("loaders work 45.0 ms per 100.1 ms step (2 loader workers) but keep ahead") !=
        std::string::npos);

  SECTION("loaders that are not busy are not worth a note") {
    for (auto& st : job.ranks[0].steps) st.loader_busy_ns = 5 * kMs;
    const WhatIfReport quiet = what_if(job);
    CHECK_FALSE(find(quiet, 0, Category::data_loading));
  }
}
