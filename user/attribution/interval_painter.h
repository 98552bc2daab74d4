// SPDX-License-Identifier: Apache-2.0
// Splits a window's time among overlapping labelled intervals: at every
// instant the highest-priority interval covering it wins; uncovered time
// goes to the fallback. The result sums exactly to the window length.
#pragma once

#include <algorithm>
#include <cstdint>
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
  // Paints sorted by start let each elementary piece scan only candidates.
  std::vector<const Paint*> live;
  for (const auto& p : paints)
    if (p.end > ws && p.start < we && p.end > p.start) live.push_back(&p);
  std::sort(live.begin(), live.end(), [](const Paint* a, const Paint* b) { return a->start < b->start; });
  size_t first = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    uint64_t a = cuts[i], b = cuts[i + 1];
    while (first < live.size() && live[first]->end <= a) ++first;
    int best = -1;
    Category cat = fallback;
    for (size_t j = first; j < live.size() && live[j]->start < b; ++j) {
      const Paint* p = live[j];
      if (p->start <= a && p->end >= b && p->priority > best) {
        best = p->priority;
        cat = p->category;
      }
    }
    out[static_cast<size_t>(cat)] += b - a;
  }
  return out;
}

}  // namespace steptrace
