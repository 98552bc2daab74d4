// SPDX-License-Identifier: Apache-2.0
#include "steps/step_builder.h"

#include <algorithm>

#include "steps/ranks.h"
#include "steps/span_classes.h"
#include "timeline/timeline_ranges.h"
#include "util/intervals.h"

namespace steptrace {

const char* step_source_name(StepSource s) {
  switch (s) {
    case StepSource::runtime_probes: return "runtime probes (nrt_execute)";
    case StepSource::marker: return "step marker (steptrace_step)";
    case StepSource::automatic: return "automatic (accelerator queue kicks)";
    case StepSource::automatic_host: return "automatic (collective traffic period)";
    default: return "none";
  }
}

namespace steps {

// Where step k begins, between the end of the previous execution (lo) and
// the start of this one (hi): after the previous step's tail (output copies,
// host collective, host compute), at the first wait for a batch from a
// loader or, when the batch was ready, at the first input copy.
uint64_t find_boundary(const RankSteps& r, uint64_t lo, uint64_t hi) {
  const auto& t = *r.main;
  uint64_t post_end = lo;
  for (auto it = spans_starting_from(t, lo); it != t.spans.end() && it->start <= hi; ++it)
    if ((is_net(*it) || is_d2h(*it)) && it->end <= hi) post_end = std::max(post_end, it->end);
  uint64_t c1 = hi;
  for (auto it = spans_starting_from(t, post_end); it != t.spans.end() && it->start <= hi; ++it)
    if (is_h2d(*it)) {
      c1 = it->start;
      break;
    }
  for (auto it = segs_starting_from(t, post_end); it != t.segs.end(); ++it) {
    const auto& g = *it;
    if (g.start >= c1) break;
    if (is_blocked(g.state) && r.loaders.count(g.waker_tid)) return g.start;
  }
  return c1;
}

// Without executions (host_only): step k begins after the previous step's
// collective, at the first wait for a batch from a loader, or right after
// that collective when the batch was ready.
uint64_t find_host_boundary(const RankSteps& r, uint64_t lo, uint64_t hi) {
  for (auto it = segs_starting_from(*r.main, lo); it != r.main->segs.end(); ++it) {
    const auto& g = *it;
    if (g.start >= hi) break;
    if (is_blocked(g.state) && r.loaders.count(g.waker_tid)) return g.start;
  }
  return lo;
}

namespace {

// Time the thread waited for a CPU (runnable: preempted, throttled) inside [lo, hi).
uint64_t runnable_ns(const ThreadTimeline& t, uint64_t lo, uint64_t hi) {
  uint64_t n = 0;
  for (auto it = segs_ending_after(t, lo); it != t.segs.end() && it->start < hi; ++it)
    if (it->state == ThreadState::runnable) n += std::min(it->end, hi) - std::max(it->start, lo);
  return n;
}

// The end of the runtime's set-up before the first execution: its last
// set-up call on the device (memory allocation, device info, NQ/NDS set-up,
// reset) on the main thread. Step 0 begins after it: a wait for the loaders
// before the model was even loaded (their start-up handshake) is not the
// first step's wait for a batch, however close the two are in time.
uint64_t setup_end(const RankSteps& r, uint64_t first_exec) {
  uint64_t end = 0;
  for (const auto& s : r.main->spans)
    if (s.end <= first_exec && is_ioctl_class(s, NEURON_CLASS_SETUP)) end = std::max(end, s.end);
  return end;
}

// Step starts: the markers, or one boundary before each anchor.
std::vector<uint64_t> step_starts(const RankSteps& r, uint64_t thread_start) {
  if (r.source == StepSource::marker) return r.main->markers;
  std::vector<uint64_t> bounds;
  const auto& A = r.anchors;
  if (A.empty()) return bounds;
  std::vector<uint64_t> periods;
  for (size_t k = 1; k < A.size(); ++k) periods.push_back(A[k].start - A[k - 1].start);
  uint64_t period = median_ns(periods);
  for (size_t k = 0; k < A.size(); ++k) {
    // Step 0 of a CPU-only job begins at its first wait for a batch (the
    // loaders' start-up): there is no execution to bound it.
    // After the previous collective: its bulk, when a small burst of this
    // step's was grouped with it (steps/anchors.cpp, Anchor::bulk_end).
    uint64_t lo = k                 ? (A[k - 1].bulk_end ? A[k - 1].bulk_end : A[k - 1].end)
                  : r.host_only     ? 0
                  : (period && A[0].start > 2 * period ? A[0].start - 2 * period : 0);
    lo = std::max(lo, thread_start);
    if (k == 0 && !r.host_only) lo = std::max(lo, setup_end(r, A[0].start));
    bounds.push_back(r.host_only ? find_host_boundary(r, lo, A[k].start) : find_boundary(r, lo, A[k].start));
  }
  return bounds;
}

// The last step ends after its tail: the typical time from execution end
// (or marker) to the next boundary, clamped to what the thread did.
uint64_t last_step_end(const RankSteps& r, const std::vector<uint64_t>& bounds, uint64_t thread_end) {
  std::vector<uint64_t> tails;
  uint64_t last_end;
  if (r.source == StepSource::marker) {
    // Each marker opens a step; the time after the last marker is a step only
    // if the thread kept working for most of a typical period (a final
    // marker call that closes the loop opens nothing).
    for (size_t k = 1; k < bounds.size(); ++k) tails.push_back(bounds[k] - bounds[k - 1]);
    uint64_t period = median_ns(tails);
    last_end = bounds.back() + period;
    if (thread_end && thread_end < bounds.back() + period / 2) last_end = bounds.back();
  } else {
    const auto& A = r.anchors;
    std::vector<uint64_t> waits;
    for (size_t k = 1; k < A.size(); ++k)
      if (bounds[k] > A[k - 1].end) {
        tails.push_back(bounds[k] - A[k - 1].end);
        waits.push_back(runnable_ns(*r.main, A[k - 1].end, bounds[k]));
      }
    last_end = A.back().end + median_ns(tails);
    // More waiting for a CPU than in a typical tail stretched this one: on a
    // small host the other ranks' exits preempt the last step (a registration
    // at its end fell after it).
    const uint64_t wait = runnable_ns(*r.main, A.back().end, last_end), typical = median_ns(waits);
    if (wait > typical) last_end += wait - typical;
  }
  if (thread_end && last_end > thread_end) last_end = thread_end;
  return last_end;
}

}  // namespace

void build_steps(RankSteps& r) {
  const auto& t = *r.main;
  uint64_t thread_end = t.segs.empty() ? 0 : t.segs.back().end;
  if (!t.spans.empty()) thread_end = std::max(thread_end, t.spans.back().end);
  uint64_t thread_start = t.segs.empty() ? 0 : t.segs.front().start;

  std::vector<uint64_t> bounds = step_starts(r, thread_start);
  if (bounds.empty()) return;
  uint64_t last_end = last_step_end(r, bounds, thread_end);
  if (last_end > bounds.back()) bounds.push_back(last_end);
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    if (bounds[k + 1] <= bounds[k]) continue;
    r.steps.push_back({bounds[k], bounds[k + 1]});
  }
}

std::vector<RankSteps> reconstruct_steps(const TimelineStore& tl, const ThreadTable& threads,
                                         const std::map<uint32_t, BurstModel>& known) {
  std::vector<RankSteps> ranks = accelerator_ranks(tl, threads);
  if (ranks.empty()) ranks = host_only_ranks(tl, threads, known);
  std::sort(ranks.begin(), ranks.end(), [](const RankSteps& a, const RankSteps& b) { return a.pid < b.pid; });
  for (size_t i = 0; i < ranks.size(); ++i) {
    ranks[i].rank = static_cast<int>(i);
    for (const auto& a : ranks[i].anchors) ranks[i].max_anchor_ns = std::max(ranks[i].max_anchor_ns, a.end - a.start);
    build_steps(ranks[i]);
  }
  return ranks;
}

}  // namespace steps
}  // namespace steptrace
