// SPDX-License-Identifier: Apache-2.0
// Change points in step time: found where they were planted, with the rank
// and category that moved, and not found in steady series (noise, a slow
// outlier step, steps that alternate fast and slow).
#include <catch2/catch.hpp>

#include <random>

#include "attribution/change_points.h"

using namespace steptrace;

namespace {

struct Plan {
  int steps = 120;
  double device_ms = 40, data_ms = 5, host_ms = 3;
  double noise_cv = 0.05;
  unsigned seed = 1;
};

constexpr auto kDev = static_cast<size_t>(Category::device_execute);
constexpr auto kData = static_cast<size_t>(Category::data_loading);
constexpr auto kHost = static_cast<size_t>(Category::host_overhead);
constexpr auto kColl = static_cast<size_t>(Category::collective);

// One rank's steps; `extra(k, ns)` adds what the test plants in step k.
template <typename Extra>
std::vector<SeriesPoint> series(const Plan& p, Extra extra) {
  std::mt19937 rng(p.seed);
  std::normal_distribution<double> noise(0, p.noise_cv);
  std::vector<SeriesPoint> out;
  uint64_t t = 1'000'000'000;
  for (int k = 0; k < p.steps; ++k) {
    SeriesPoint s;
    s.index = k + 1;
    s.start_ns = t;
    s.ns[kDev] = static_cast<uint64_t>(p.device_ms * 1e6 * std::max(0.2, 1 + noise(rng)));
    s.ns[kData] = static_cast<uint64_t>(p.data_ms * 1e6 * std::max(0.2, 1 + noise(rng)));
    s.ns[kHost] = static_cast<uint64_t>(p.host_ms * 1e6 * std::max(0.2, 1 + noise(rng)));
    extra(k, s.ns);
    for (auto v : s.ns) s.duration_ns += v;
    t += s.duration_ns;
    out.push_back(s);
  }
  return out;
}

auto nothing = [](int, CategoryNs&) {};

}  // namespace

TEST_CASE("change points: a planted rise in one rank's data loading is found at its step, with its rank and category",
          "[unit][changes]") {
  Plan p;
  // Rank 1's loaders slow down at step 60 (index 61): it arrives late and rank 0 waits for it.
  auto r0 = series(p, [](int k, CategoryNs& ns) {
    if (k >= 60) ns[kColl] += 20'000'000;
  });
  p.seed = 2;
  auto r1 = series(p, [](int k, CategoryNs& ns) {
    if (k >= 60) ns[kData] += 20'000'000;
  });
  auto changes = find_changes({{0, &r0}, {1, &r1}});
  REQUIRE(changes.size() == 1);
  const auto& c = changes[0];
  CHECK(std::abs(c.step - 61) <= 2);
  CHECK(c.slower());
  CHECK(c.change_pct() == Approx(20.0 / 48.0 * 100).margin(5));
  CHECK(c.cause == Category::data_loading);
  CHECK(c.cause_rank == 1);
  CHECK(c.cause_delta_ms == Approx(20).margin(2));
  CHECK(c.ranks == std::vector<int>{0, 1});
  CHECK(describe_change(c).find("step time rose") == 0);
  CHECK(describe_change(c).find("data_loading +") != std::string::npos);
}

TEST_CASE("change points: the collective growing on every rank alone is named collective", "[unit][changes]") {
  Plan p;
  auto slow_net = [](int k, CategoryNs& ns) {
    if (k >= 50) ns[kColl] += 15'000'000;
  };
  auto r0 = series(p, slow_net);
  p.seed = 7;
  auto r1 = series(p, slow_net);
  auto changes = find_changes({{0, &r0}, {1, &r1}});
  REQUIRE(changes.size() == 1);
  CHECK(std::abs(changes[0].step - 51) <= 2);
  CHECK(changes[0].cause == Category::collective);
}

TEST_CASE("change points: a step time that falls is reported as such", "[unit][changes]") {
  Plan p;
  auto r0 = series(p, [](int k, CategoryNs& ns) {
    if (k < 40) ns[kHost] += 12'000'000;
  });
  auto changes = find_changes({{0, &r0}});
  REQUIRE(changes.size() == 1);
  CHECK(!changes[0].slower());
  CHECK(changes[0].cause == Category::host_overhead);
  CHECK(changes[0].cause_delta_ms == Approx(-12).margin(2));
  CHECK(describe_change(changes[0]).find("step time fell") == 0);
}

TEST_CASE("change points: two changes in one series are both found", "[unit][changes]") {
  Plan p;
  p.steps = 200;
  auto r0 = series(p, [](int k, CategoryNs& ns) {
    if (k >= 60 && k < 140) ns[kData] += 15'000'000;
  });
  auto changes = find_changes({{0, &r0}});
  REQUIRE(changes.size() == 2);
  CHECK(std::abs(changes[0].step - 61) <= 2);
  CHECK(changes[0].slower());
  CHECK(std::abs(changes[1].step - 141) <= 2);
  CHECK(!changes[1].slower());
}

TEST_CASE("change points: steady series are quiet (noise, slow outlier steps, alternating steps, small drifts)",
          "[unit][changes]") {
  int found = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    Plan p;
    p.seed = seed;
    p.noise_cv = 0.02 * (1 + seed % 5);  // 2 .. 10 % per category
    auto plain = series(p, nothing);
    // A checkpoint every 50 steps takes 300 ms more.
    auto outliers = series(p, [](int k, CategoryNs& ns) {
      if (k % 50 == 25) ns[kHost] += 300'000'000;
    });
    // A two-worker loader on slow storage: every other step waits 20 ms.
    auto alternating = series(p, [](int k, CategoryNs& ns) {
      if (k % 2) ns[kData] += 20'000'000;
    });
    // A drift of 4 % over the whole run: under the 10 % a change must reach.
    auto drift = series(p, [&](int k, CategoryNs& ns) { ns[kHost] += static_cast<uint64_t>(k * 2e6 / p.steps); });
    for (const auto* s : {&plain, &outliers, &alternating, &drift})
      found += static_cast<int>(find_changes({{0, s}}).size());
  }
  CHECK(found == 0);
}

TEST_CASE("change points: a series shorter than two segments has none, and a flat one has none", "[unit][changes]") {
  Plan p;
  p.steps = 15;
  auto r0 = series(p, [](int k, CategoryNs& ns) {
    if (k >= 8) ns[kData] += 50'000'000;
  });
  CHECK(find_changes({{0, &r0}}).empty());
  std::vector<double> flat(100, 10.0);
  CHECK(change_indices(flat).empty());
  std::vector<double> step(100, 10.0);
  for (size_t i = 50; i < step.size(); ++i) step[i] = 12.0;
  CHECK(change_indices(step) == std::vector<size_t>{50});
}

TEST_CASE("change points: a slowdown that makes every other step wait (one slow loader of two) is found",
          "[unit][changes]") {
  Plan p;
  p.steps = 80;
  auto r1 = series(p, [](int k, CategoryNs& ns) {
    if (k >= 40) ns[kData] += static_cast<uint64_t>(k % 2 ? 450e6 : 10e6) + static_cast<uint64_t>(k % 7) * 30'000'000;
  });
  auto changes = find_changes({{1, &r1}});
  REQUIRE(changes.size() == 1);
  CHECK(std::abs(changes[0].step - 41) <= 2);
  CHECK(changes[0].cause == Category::data_loading);
}
