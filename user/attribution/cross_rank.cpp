// SPDX-License-Identifier: Apache-2.0
#include "attribution/cross_rank.h"

#include <algorithm>
#include <limits>

#include "attribution/step_pairing.h"
#include "steps/span_classes.h"
#include "util/intervals.h"

namespace steptrace {

namespace {
constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
}  // namespace

namespace {

// When an execution's device work began: the end of its last queue kick on
// the rank's main thread (the device starts on the kicks), else its entry.
// A rank preempted between entering nrt_execute and kicking its queues
// starts its device late, and the others wait for it: its entry would say
// it was early.
uint64_t device_start(const steps::RankSteps& r, const steps::Anchor& a) {
  uint64_t at = a.start;
  if (!r.main) return at;
  const auto& sp = r.main->spans;
  auto it = std::partition_point(sp.begin(), sp.end(), [&](const Span& s) { return s.start < a.start; });
  for (; it != sp.end() && it->start < a.end; ++it)
    if (steps::is_kick(*it)) at = std::max(at, std::min(it->end, a.end));
  return at;
}

}  // namespace

// A device-side collective (inside the execution) makes every rank leave
// nrt_execute together; a rank whose device started earlier spent the
// difference waiting for the others (alike work per rank). Without device
// counters (NDS) that skew of device starts is the best kernel-side
// estimate of device collective wait.
void apply_device_skew(std::vector<RankWork>& ranks) {
  if (ranks.size() < 2) return;
  std::vector<std::vector<uint64_t>> ends;
  for (const auto& r : ranks) {
    ends.emplace_back();
    for (const auto& a : r.steps->anchors) ends.back().push_back(a.end);
  }
  const std::vector<long> shift = pair_by_end(ends);
  for (size_t k = 0; k < ends[0].size(); ++k) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < ranks.size(); ++i) idx.push_back(paired_index(k, shift[i], ends[i].size()));
    if (std::find(idx.begin(), idx.end(), kUnpaired) != idx.end()) continue;
    uint64_t max_entry = 0, min_exit = kInf, max_exit = 0;
    std::vector<uint64_t> began(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      const auto& a = ranks[i].steps->anchors[idx[i]];
      began[i] = device_start(*ranks[i].steps, a);
      max_entry = std::max(max_entry, began[i]);
      min_exit = std::min(min_exit, a.end);
      max_exit = std::max(max_exit, a.end);
    }
    uint64_t span = max_exit - min_exit;
    uint64_t typical = ranks[0].steps->anchors[k].end - ranks[0].steps->anchors[k].start;
    if (span > 2'000'000ull && span > typical / 10) continue;  // exits not synchronised: no device collective
    for (size_t i = 0; i < ranks.size(); ++i) {
      auto& r = ranks[i];
      const auto& a = r.steps->anchors[idx[i]];
      uint64_t wait = max_entry > began[i] ? std::min(max_entry - began[i], a.end - began[i]) : 0;
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
  std::vector<uint64_t> durs;
  std::vector<std::vector<uint64_t>> ends;
  for (const auto& r : ranks) {
    ends.emplace_back();
    for (const auto& s : r.res.steps) {
      durs.push_back(s.duration());
      ends.back().push_back(s.end_ns);
    }
  }
  uint64_t typical = median_ns(durs);
  // Step k of rank 0 and the steps of the other ranks that end with it.
  const std::vector<long> shift = pair_by_end(ends);
  for (size_t k = 0; k < ends[0].size(); ++k) {
    std::vector<StepResult*> step;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const size_t j = paired_index(k, shift[i], ranks[i].res.steps.size());
      if (j == kUnpaired) break;
      step.push_back(&ranks[i].res.steps[j]);
    }
    if (step.size() != ranks.size()) continue;
    uint64_t first = kInf, last = 0;
    size_t first_rank = 0, last_rank = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      uint64_t a = step[i]->arrival_ns;
      if (!a) continue;
      if (a < first) {
        first = a;
        first_rank = i;
      }
      if (a > last) {
        last = a;
        last_rank = i;
      }
    }
    if (first == kInf) continue;
    for (StepResult* st : step) st->late_ns = st->arrival_ns > first ? st->arrival_ns - first : 0;
    // A late rank only holds the others back where a collective couples
    // them: a host collective in this step on every rank, or executions
    // that all end together (a device collective). Uncoupled ranks drift
    // apart freely; naming one of them a straggler would mislead.
    const uint64_t tolerance = std::max<uint64_t>(1'000'000ull, typical / 20);
    bool coupled = true;
    for (const StepResult* st : step) coupled = coupled && st->host_collective;
    if (!coupled) {
      uint64_t min_end = kInf, max_end = 0;
      bool all = true;
      for (size_t i = 0; i < ranks.size(); ++i) {
        const auto& r = ranks[i];
        const auto& st = *step[i];
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
    for (StepResult* st : step) st->coupled = coupled;
    // A rank that really arrives late holds the first one back: the first
    // waits in the collective for about the lateness more than the late one
    // does. Where both wait alike (a symmetric job whose ranks' steps were
    // cut at different phases of the same collective), the skew is not a
    // straggler's.
    constexpr size_t kColl = static_cast<size_t>(Category::collective);
    const uint64_t c_first = step[first_rank]->ns[kColl], c_last = step[last_rank]->ns[kColl];
    const bool held_back = c_first > c_last && (c_first - c_last) * 2 >= last - first;
    StepResult& late = *step[last_rank];
    if (coupled && held_back && late.index >= skip && last - first > tolerance) {
      ++ranks[last_rank].res.straggler_steps;
      late.straggler = true;
    }
  }
}

}  // namespace steptrace
