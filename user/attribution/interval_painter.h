// SPDX-License-Identifier: Apache-2.0
// Splits a window's time among overlapping labelled intervals: at every
// instant the highest-priority interval covering it wins; uncovered time
// goes to the fallback. The result sums exactly to the window length.
#pragma once

#include <algorithm>
#include <cstdint>
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
  // A sweep over the pieces. The paints that have begun wait in a queue per
  // priority, in order of start (they begin in that order); one that has
  // ended leaves when it reaches the front. The front of the highest
  // non-empty queue wins: the highest priority, then the earliest start.
  // Each paint is queued and dropped once, and the few priorities are
  // scanned per piece (a binary heap here was a seventh of a busy session's
  // CPU, issue 19). A second set of queues holds the paints other than `over`.
  std::vector<const Paint*> live;
  for (const auto& p : paints)
    if (p.end > ws && p.start < we && p.end > p.start) live.push_back(&p);
  sort_runs(live.begin(), live.end(), [](const Paint* a, const Paint* b) { return a->start < b->start; });
  std::vector<int> prios;
  for (const Paint* p : live)
    if (std::find(prios.begin(), prios.end(), p->priority) == prios.end()) prios.push_back(p->priority);
  std::sort(prios.begin(), prios.end());
  struct Queue {
    std::vector<const Paint*> q;
    size_t head = 0;
    // The earliest-starting paint still covering `at`, or none.
    const Paint* front(uint64_t at) {
      while (head < q.size() && q[head]->end <= at) ++head;
      return head < q.size() ? q[head] : nullptr;
    }
  };
  std::vector<Queue> active(prios.size()), beneath(over != Category::count_ ? prios.size() : 0);
  auto winner = [](std::vector<Queue>& levels, uint64_t at) -> const Paint* {
    for (size_t l = levels.size(); l-- > 0;)
      if (const Paint* p = levels[l].front(at)) return p;
    return nullptr;
  };
  size_t next = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    uint64_t a = cuts[i], b = cuts[i + 1];
    for (; next < live.size() && live[next]->start <= a; ++next) {
      const Paint* p = live[next];
      const auto l = static_cast<size_t>(std::lower_bound(prios.begin(), prios.end(), p->priority) - prios.begin());
      active[l].q.push_back(p);
      if (!beneath.empty() && p->category != over) beneath[l].q.push_back(p);
    }
    // Cuts fall on every start and end: a paint that has begun and not ended covers [a, b).
    const Paint* top = winner(active, a);
    const Category cat = top ? top->category : fallback;
    out.ns[static_cast<size_t>(cat)] += b - a;
    if (top && top->tagged) out.tagged_ns += b - a;
    if (top && top->throttled) out.throttled_ns += b - a;
    if (cat != over || beneath.empty()) continue;
    const Paint* under = winner(beneath, a);
    out.under[static_cast<size_t>(under ? under->category : fallback)] += b - a;
  }
  return out;
}

inline CategoryNs paint_window(uint64_t ws, uint64_t we, const std::vector<Paint>& paints,
                               Category fallback = Category::other) {
  return paint_window_under(ws, we, paints, Category::count_, fallback).ns;
}

}  // namespace steptrace
