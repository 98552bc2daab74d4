// SPDX-License-Identifier: Apache-2.0
// Splits a window's time among overlapping labelled intervals: at every
// instant the highest-priority interval covering it wins; uncovered time
// goes to the fallback. The result sums exactly to the window length.
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <vector>

#include "attribution/categories.h"

namespace steptrace {

struct Paint {
  uint64_t start, end;
  int priority;
  Category category;
};

inline CategoryNs paint_window(uint64_t ws, uint64_t we, const std::vector<Paint>& paints,
                               Category fallback = Category::other) {
  CategoryNs out{};
  if (we <= ws) return out;
  std::vector<uint64_t> cuts{ws, we};
  for (const auto& p : paints) {
    if (p.end <= ws || p.start >= we) continue;
    cuts.push_back(std::max(p.start, ws));
    cuts.push_back(std::min(p.end, we));
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // A sweep over the pieces: the paints that have begun wait in a queue by
  // priority (then earliest start); one that has ended leaves when it comes
  // to the top. Each piece costs a log, not a scan of every paint that began
  // before it (a long execution paint kept that scan going for the whole step).
  std::vector<const Paint*> live;
  for (const auto& p : paints)
    if (p.end > ws && p.start < we && p.end > p.start) live.push_back(&p);
  std::sort(live.begin(), live.end(), [](const Paint* a, const Paint* b) { return a->start < b->start; });
  auto lower = [](const Paint* x, const Paint* y) {
    if (x->priority != y->priority) return x->priority < y->priority;
    return x->start > y->start;
  };
  std::priority_queue<const Paint*, std::vector<const Paint*>, decltype(lower)> active(lower);
  size_t next = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    uint64_t a = cuts[i], b = cuts[i + 1];
    while (next < live.size() && live[next]->start <= a) active.push(live[next++]);
    while (!active.empty() && active.top()->end <= a) active.pop();
    // Cuts fall on every start and end: a paint that has begun and not ended covers [a, b).
    const Category cat = active.empty() ? fallback : active.top()->category;
    out[static_cast<size_t>(cat)] += b - a;
  }
  return out;
}

}  // namespace steptrace
