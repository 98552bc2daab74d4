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
#include "util/sort_runs.h"

namespace steptrace {

struct Paint {
  uint64_t start, end;
  int priority;
  Category category;
  bool tagged = false;  // counted apart where it wins (Painted::tagged_ns)
  bool throttled = false;  // a wait for a CPU quota, counted apart where it wins (Painted::throttled_ns)
};

// A window painted, and for the time `over` wins (a thread waiting for a
// CPU), the category that would have won without it: what the thread waited
// inside of (a copy, a collective, its wake-up from a wait). The what-if
// removes such waits with the work they were part of.
struct Painted {
  CategoryNs ns{};
  CategoryNs under{};      // time painted `over`, by the category beneath it
  uint64_t tagged_ns = 0;  // time won by tagged paints
  uint64_t throttled_ns = 0;  // time won by throttled paints
};

inline Painted paint_window_under(uint64_t ws, uint64_t we, const std::vector<Paint>& paints, Category over,
                                  Category fallback = Category::other) {
  Painted out;
  if (we <= ws) return out;
  std::vector<uint64_t> cuts{ws, we};
  for (const auto& p : paints) {
    if (p.end <= ws || p.start >= we) continue;
    cuts.push_back(std::max(p.start, ws));
    cuts.push_back(std::min(p.end, we));
  }
  sort_runs(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // A sweep over the pieces: the paints that have begun wait in a queue by
  // priority (then earliest start); one that has ended leaves when it comes
  // to the top. Each piece costs a log, not a scan of every paint that began
  // before it (a long execution paint kept that scan going for the whole step).
  // A second queue holds the paints other than `over`.
  std::vector<const Paint*> live;
  for (const auto& p : paints)
    if (p.end > ws && p.start < we && p.end > p.start) live.push_back(&p);
  sort_runs(live.begin(), live.end(), [](const Paint* a, const Paint* b) { return a->start < b->start; });
  auto lower = [](const Paint* x, const Paint* y) {
    if (x->priority != y->priority) return x->priority < y->priority;
    return x->start > y->start;
  };
  using Queue = std::priority_queue<const Paint*, std::vector<const Paint*>, decltype(lower)>;
  Queue active(lower), beneath(lower);
  size_t next = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    uint64_t a = cuts[i], b = cuts[i + 1];
    for (; next < live.size() && live[next]->start <= a; ++next) {
      active.push(live[next]);
      if (over != Category::count_ && live[next]->category != over) beneath.push(live[next]);
    }
    while (!active.empty() && active.top()->end <= a) active.pop();
    // Cuts fall on every start and end: a paint that has begun and not ended covers [a, b).
    const Category cat = active.empty() ? fallback : active.top()->category;
    out.ns[static_cast<size_t>(cat)] += b - a;
    if (!active.empty() && active.top()->tagged) out.tagged_ns += b - a;
    if (!active.empty() && active.top()->throttled) out.throttled_ns += b - a;
    if (cat != over) continue;
    while (!beneath.empty() && beneath.top()->end <= a) beneath.pop();
    out.under[static_cast<size_t>(beneath.empty() ? fallback : beneath.top()->category)] += b - a;
  }
  return out;
}

inline CategoryNs paint_window(uint64_t ws, uint64_t we, const std::vector<Paint>& paints,
                               Category fallback = Category::other) {
  return paint_window_under(ws, we, paints, Category::count_, fallback).ns;
}

}  // namespace steptrace
