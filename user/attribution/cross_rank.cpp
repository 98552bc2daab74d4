// SPDX-License-Identifier: Apache-2.0
#include "attribution/cross_rank.h"

#include <algorithm>
#include <limits>

#include "util/intervals.h"

namespace steptrace {

namespace {
constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
}  // namespace

// A device-side collective (inside the execution) makes every rank leave
// nrt_execute together; a rank that entered earlier spent the difference
// waiting for the others. Without device counters (NDS) that arrival skew is
// the best kernel-side estimate of device collective wait.
void apply_device_skew(std::vector<RankWork>& ranks) {
  if (ranks.size() < 2) return;
  size_t n = kInf;
  for (const auto& r : ranks) n = std::min(n, r.steps->anchors.size());
  for (size_t k = 0; k < n; ++k) {
    uint64_t max_entry = 0, min_exit = kInf, max_exit = 0;
    for (const auto& r : ranks) {
      max_entry = std::max(max_entry, r.steps->anchors[k].start);
      min_exit = std::min(min_exit, r.steps->anchors[k].end);
      max_exit = std::max(max_exit, r.steps->anchors[k].end);
    }
    uint64_t span = max_exit - min_exit;
    uint64_t typical = ranks[0].steps->anchors[k].end - ranks[0].steps->anchors[k].start;
    if (span > 2'000'000ull && span > typical / 10) continue;  // exits not synchronised: no device collective
    for (auto& r : ranks) {
      const auto& a = r.steps->anchors[k];
      uint64_t wait = max_entry > a.start ? std::min(max_entry - a.start, a.end - a.start) : 0;
      if (wait < 200'000) continue;
      // The step the execution began in (steps are contiguous, in order).
      auto it = std::partition_point(r.res.steps.begin(), r.res.steps.end(),
                                     [&](const StepResult& st) { return st.end_ns <= a.start; });
      if (it != r.res.steps.end() && a.start >= it->start_ns) {
        auto& st = *it;
        auto& de = st.ns[static_cast<size_t>(Category::device_execute)];
        uint64_t moved = std::min(wait, de);
        de -= moved;
        st.ns[static_cast<size_t>(Category::collective)] += moved;
      }
    }
  }
}

void cross_rank(std::vector<RankWork>& ranks, int skip) {
  if (ranks.size() < 2) return;
  size_t n = kInf;
  for (const auto& r : ranks) n = std::min(n, r.res.steps.size());
  std::vector<uint64_t> durs;
  for (const auto& r : ranks)
    for (const auto& s : r.res.steps) durs.push_back(s.duration());
  uint64_t typical = median_ns(durs);
  for (size_t k = 0; k < n; ++k) {
    uint64_t first = kInf, last = 0;
    size_t last_rank = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      uint64_t a = ranks[i].res.steps[k].arrival_ns;
      if (!a) continue;
      first = std::min(first, a);
      if (a > last) {
        last = a;
        last_rank = i;
      }
    }
    if (first == kInf) continue;
    for (auto& r : ranks) {
      auto& st = r.res.steps[k];
      st.late_ns = st.arrival_ns > first ? st.arrival_ns - first : 0;
    }
    // A late rank only holds the others back where a collective couples
    // them: a host collective in this step on every rank, or executions
    // that all end together (a device collective). Uncoupled ranks drift
    // apart freely; naming one of them a straggler would mislead.
    const uint64_t tolerance = std::max<uint64_t>(1'000'000ull, typical / 20);
    bool coupled = true;
    for (const auto& r : ranks) coupled = coupled && r.res.steps[k].host_collective;
    if (!coupled) {
      uint64_t min_end = kInf, max_end = 0;
      bool all = true;
      for (const auto& r : ranks) {
        const auto& st = r.res.steps[k];
        const steps::Anchor* an = nullptr;
        const auto& A = r.steps->anchors;  // in start order
        auto a = std::partition_point(A.begin(), A.end(), [&](const steps::Anchor& x) { return x.start < st.start_ns; });
        if (a != A.end() && a->start < st.end_ns) an = &*a;
        if (!an) {
          all = false;
          break;
        }
        min_end = std::min(min_end, an->end);
        max_end = std::max(max_end, an->end);
      }
      coupled = all && max_end - min_end <= tolerance;
    }
    auto& late = ranks[last_rank].res;
    if (coupled && late.steps[k].index >= skip && last - first > tolerance) {
      ++late.straggler_steps;
      late.steps[k].straggler = true;
    }
  }
}

}  // namespace steptrace
