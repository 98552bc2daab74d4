// SPDX-License-Identifier: Apache-2.0
// The cross-rank pass (attribution/cross_rank.h): which steps of the ranks
// are the same collective instance, and when a late arrival is a straggler's.
#include <catch2/catch.hpp>

#include <vector>

#include "attribution/cross_rank.h"

using namespace steptrace;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr size_t kColl = static_cast<size_t>(Category::collective);

// One rank: `n` 100 ms steps from t0, each arriving at the host collective
// `arrive` ms in and waiting `wait` ms in it; the step ends at the
// collective's exit (which every rank shares).
RankWork rank(const steps::RankSteps& s, uint64_t t0, int n, uint64_t arrive, uint64_t wait) {
  RankWork w;
  w.steps = &s;
  for (int k = 0; k < n; ++k) {
    StepResult st;
    st.index = k;
    st.start_ns = t0 + static_cast<uint64_t>(k) * 100 * kMs;
    st.end_ns = st.start_ns + 100 * kMs;
    st.arrival_ns = st.start_ns + arrive * kMs;
    st.host_collective = true;
    st.ns[kColl] = wait * kMs;
    w.res.steps.push_back(st);
  }
  return w;
}

}  // namespace

TEST_CASE("cross-rank: a straggler is found when one rank's steps are numbered one ahead", "[cross_rank][unit]") {
  // Rank 1 was traced from one step earlier (attach began mid-step on rank
  // 0): its step k+1 is rank 0's step k. It arrives 30 ms after rank 0,
  // which waits those 30 ms in the collective.
  steps::RankSteps s0, s1;
  std::vector<RankWork> ranks;
  ranks.push_back(rank(s0, 1000 * kMs, 20, 50, 35));
  ranks.push_back(rank(s1, 900 * kMs, 21, 80, 5));
  cross_rank(ranks, 1);
  CHECK(ranks[0].res.straggler_steps == 0);
  CHECK(ranks[1].res.straggler_steps >= 19);
  CHECK(ranks[1].res.steps[5].late_ns == 30 * kMs);
  CHECK(ranks[0].res.steps[4].late_ns == 0);
}

TEST_CASE("cross-rank: a skew the first rank did not wait for is no straggler's", "[cross_rank][unit]") {
  // A symmetric job: both ranks wait 60 ms in every collective, but rank 1's
  // arrival reads 25 ms later (its steps were cut at another phase of the
  // same collective). Nobody held anybody back.
  steps::RankSteps s0, s1;
  std::vector<RankWork> ranks;
  ranks.push_back(rank(s0, 1000 * kMs, 20, 30, 60));
  ranks.push_back(rank(s1, 1000 * kMs, 20, 55, 60));
  cross_rank(ranks, 1);
  CHECK(ranks[0].res.straggler_steps == 0);
  CHECK(ranks[1].res.straggler_steps == 0);
  CHECK(ranks[1].res.steps[3].late_ns == 25 * kMs);  // the skew is still reported per step
}
