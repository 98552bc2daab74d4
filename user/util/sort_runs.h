// SPDX-License-Identifier: Apache-2.0
// Sorting a sequence made of a few ascending runs: several sorted sources
// appended one after another (a step's paints: the executions, the spans,
// the state segments, each in time order). Merging the runs costs n log k
// for k runs where std::sort costs n log n, and such inputs drove
// libstdc++'s introsort into its heapsort fallback (perf of a replay,
// issue 19: the paints' sort was a tenth of the analysis).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace steptrace {

// Past this many runs the input is not "a few sorted sources": std::sort.
inline constexpr size_t kSortRunsMax = 32;

template <class It, class Comp = std::less<>>
void sort_runs(It first, It last, Comp comp = {}) {
  const std::ptrdiff_t n = last - first;
  if (n < 2) return;
  std::vector<std::ptrdiff_t> bounds{0};
  for (std::ptrdiff_t i = 1; i < n; ++i)
    if (comp(first[i], first[i - 1])) {
      if (bounds.size() == kSortRunsMax) {
        std::sort(first, last, comp);
        return;
      }
      bounds.push_back(i);
    }
  bounds.push_back(n);
  // Pairs of neighbouring runs merged, round by round, until one is left.
  std::vector<std::ptrdiff_t> next;
  while (bounds.size() > 2) {
    next.assign(1, 0);
    for (size_t r = 0; r + 2 < bounds.size(); r += 2) {
      std::inplace_merge(first + bounds[r], first + bounds[r + 1], first + bounds[r + 2], comp);
      next.push_back(bounds[r + 2]);
    }
    if (next.back() != n) next.push_back(n);  // an odd run out, carried to the next round
    bounds.swap(next);
  }
}

}  // namespace steptrace
