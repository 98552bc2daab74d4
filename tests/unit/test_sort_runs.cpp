// SPDX-License-Identifier: Apache-2.0
// sort_runs (util/sort_runs.h): the same order std::sort gives, for inputs
// of a few sorted runs, many runs, equal keys, and none.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "util/sort_runs.h"

using namespace steptrace;

namespace {

uint64_t g_seed = 99;
uint64_t rnd(uint64_t n) {
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  return (g_seed >> 33) % n;
}

}  // namespace

TEST_CASE("sort_runs: a few sorted sources appended, many runs, ties and edge sizes sort as std::sort does",
          "[sort_runs]") {
  for (int round = 0; round < 500; ++round) {
    std::vector<uint64_t> v;
    const size_t runs = 1 + rnd(round < 250 ? 8 : 80);  // the second half: past kSortRunsMax too
    for (size_t r = 0; r < runs; ++r) {
      std::vector<uint64_t> run(rnd(60));
      for (auto& x : run) x = rnd(round % 3 == 0 ? 10 : 100000);  // every third round: many equal keys
      std::sort(run.begin(), run.end());
      v.insert(v.end(), run.begin(), run.end());
    }
    std::vector<uint64_t> want = v;
    std::sort(want.begin(), want.end());
    sort_runs(v.begin(), v.end());
    INFO("round " << round << ", " << runs << " runs of " << want.size());
    CHECK(v == want);
  }
  std::vector<uint64_t> none, one{7}, desc{5, 4, 3, 2, 1};
  sort_runs(none.begin(), none.end());
  sort_runs(one.begin(), one.end());
  sort_runs(desc.begin(), desc.end());
  CHECK(none.empty());
  CHECK(one == std::vector<uint64_t>{7});
  CHECK(desc == std::vector<uint64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("sort_runs: a comparator orders records by a key (pointers by start), keys in order", "[sort_runs]") {
  struct P {
    uint64_t start;
    int id;
  };
  std::vector<P> items;
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 40; ++i) items.push_back({static_cast<uint64_t>(r * 7 + i * 13), r * 100 + i});
  std::vector<const P*> ptrs;
  for (const auto& p : items) ptrs.push_back(&p);
  sort_runs(ptrs.begin(), ptrs.end(), [](const P* a, const P* b) { return a->start < b->start; });
  REQUIRE(ptrs.size() == items.size());
  CHECK(std::is_sorted(ptrs.begin(), ptrs.end(), [](const P* a, const P* b) { return a->start < b->start; }));
  std::vector<int> ids;
  for (const auto* p : ptrs) ids.push_back(p->id);
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());  // each item once
}
