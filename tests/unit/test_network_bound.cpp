// SPDX-License-Identifier: Apache-2.0
// The network-bound ratio over a window (attribution/network_bound.h): a
// stalled step does not drag a saturated link's ratio down, a late rank's
// short collectives are judged against its own median, and the wait for
// the last rank is measured from the arrivals.
#include <catch2/catch.hpp>

#include "attribution/job_analysis.h"
#include "attribution/network_bound.h"

using namespace steptrace;

TEST_CASE("network bound: a stalled step is left out, per rank", "[attribution]") {
  PathTotal p;
  // Rank 0: ten steps at the link rate (bytes take as long as the collective).
  for (int i = 0; i < 10; ++i) p.steps.push_back({0, 0.040, 0.040});
  CHECK(p.ratio() == Approx(1.0));
  // One stall of 1 s (a paused VM): pooled, the ratio would fall to 0.29.
  p.steps.push_back({0, 0.040, 1.0});
  CHECK(p.ratio() == Approx(1.0));
  // Rank 1 arrives last: its collectives are short, and none is a stall.
  for (int i = 0; i < 10; ++i) p.steps.push_back({1, 0.004, 0.005});
  CHECK(p.ratio() == Approx((10 * 0.040 + 10 * 0.004) / (10 * 0.040 + 10 * 0.005)));
  CHECK(PathTotal{}.ratio() == -1);
}

TEST_CASE("network bound: the last arrival per paired step, none with one rank or a missing arrival",
          "[attribution]") {
  // Rank b's steps are numbered one ahead of a's (it was traced from one
  // step earlier): its step k + 1 ends with a's step k, and is the same
  // collective.
  RankResult a, b;
  StepResult early;
  early.start_ns = 0;
  early.end_ns = 10'000;
  early.arrival_ns = 500;
  b.steps.push_back(early);
  for (uint64_t k = 0; k < 4; ++k) {
    StepResult s;
    s.index = static_cast<int>(k);
    s.start_ns = 10'000 * (k + 1);
    s.end_ns = s.start_ns + 10'000;
    s.arrival_ns = s.start_ns + 1000;
    a.steps.push_back(s);
    s.arrival_ns = k == 1 ? 0 : s.start_ns + 1300;
    b.steps.push_back(s);
  }
  std::vector<RankResult*> one{&a}, two{&a, &b};
  CHECK(last_arrivals(one).empty());
  auto last = last_arrivals(two);
  REQUIRE(last.size() == 2);
  REQUIRE(last[0].size() == 4);
  REQUIRE(last[1].size() == 5);
  CHECK(last[0][0] == 11'300);  // a's step 0 with b's step 1
  CHECK(last[1][1] == 11'300);
  CHECK(last[0][1] == 0);       // b has no arrival in that collective
  CHECK(last[1][2] == 0);
  CHECK(last[1][0] == 0);       // b's first step pairs with none of a's
  CHECK(last[0][3] == 41'300);
}
