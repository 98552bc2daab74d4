// SPDX-License-Identifier: Apache-2.0
#include "steps/collective_in_flight.h"

#include <algorithm>

#include "steps/span_classes.h"
#include "timeline/timeline_ranges.h"

namespace steptrace::steps {

namespace {

using Interval = std::pair<uint64_t, uint64_t>;

// The main thread hands work over from inside a syscall (a futex wake, a
// write to an eventfd or a pipe). A wake in its name from outside one is a
// timer or an interrupt that fired while it ran its own code - unless no
// wake of this thread carries a syscall at all (syscalls not traced).
struct HandOver {
  uint32_t main_tid;
  bool sys_known;
  bool operator()(const StateSeg& g) const {
    return is_blocked(g.state) && g.waker_tid == main_tid && (!sys_known || g.waker_sys >= 0);
  }
};

// A block still open where the timeline ends: no waker, because the window
// closed on it or the thread exited in it. Who ends it is not known.
bool open_at_end(const ThreadTimeline& w, const StateSeg& g) {
  return &g == &w.segs.back() && is_blocked(g.state) && g.waker_tid == 0;
}

HandOver hand_over_of(const ThreadTimeline& w, uint32_t main_tid) {
  bool known = std::any_of(w.segs.begin(), w.segs.end(), [](const StateSeg& g) { return g.waker_sys >= 0; });
  return {main_tid, known};
}

// A worker's episodes: from each hand-over to the start of its next sleep
// that a hand-over ends. An episode still open when the window ends runs to
// the worker's last segment, or to the start of the block it is still in
// (the sleep after its last collective, through the job's teardown).
std::vector<Interval> worker_episodes(const ThreadTimeline& w, const HandOver& handed) {
  std::vector<Interval> out;
  // A worker that is not waiting for a hand-over where its timeline begins
  // (a later window of a long session, cut mid-collective) is inside an
  // episode that began before it.
  bool open = !w.segs.empty() && !handed(w.segs.front());
  uint64_t from = open ? w.segs.front().start : 0;
  for (const auto& g : w.segs) {
    if (!handed(g)) continue;
    if (open && g.start > from) out.emplace_back(from, g.start);
    open = true;
    from = g.end;
  }
  if (open && !w.segs.empty()) {
    const StateSeg& last = w.segs.back();
    const uint64_t to = open_at_end(w, last) ? last.start : last.end;
    if (to > from) out.emplace_back(from, to);
  }
  return out;
}

// A worker is handed work by the main thread (twice or more) and otherwise
// waits on its own process: the main thread's hand-overs, and in the middle
// of a collective the socket loop's word that the peer's bytes are in (woken
// from inside a syscall). The time it spends blocked until some other
// process, a timer or an interrupt wakes it must be the smaller part: gloo's
// socket loop is woken by the peer's traffic, the rendezvous store's server
// by the other ranks' requests, a polling thread by its timer. (The share of
// its blocked time the main thread ends alone misjudged a worker that waits
// 300 ms for a late peer every other step.)
// A block still open at the end counts for neither: a worker's last sleep,
// from the last step through the teardown (0.9 s of a 1 s window), once
// outweighed its hand-overs and the last three steps lost their in-flight
// collective (4 pp of the rank's share).
bool handed_work(const ThreadTimeline& w, const HandOver& handed) {
  uint64_t own = 0, foreign = 0;
  size_t hand_overs = 0;
  for (const auto& g : w.segs) {
    if (!is_blocked(g.state) || open_at_end(w, g)) continue;
    hand_overs += handed(g);
    const bool from_own = handed(g) || (g.waker_pid == w.pid && g.waker_sys >= 0);
    (from_own ? own : foreign) += g.end - g.start;
  }
  return hand_overs >= 2 && own > foreign;
}

// Episodes in which the worker itself sent or received.
std::vector<Interval> with_traffic(const ThreadTimeline& w, const std::vector<Interval>& episodes) {
  std::vector<Interval> out;
  for (const auto& [a, b] : episodes) {
    for (auto it = spans_overlapping_from(w, a); it != w.spans.end() && it->start < b; ++it)
      if (it->end > a && is_net(*it)) {
        out.emplace_back(a, b);
        break;
      }
  }
  return out;
}

}  // namespace

std::vector<Interval> collective_in_flight(const TimelineStore& tl, const RankSteps& r) {
  std::vector<Interval> all;
  if (!r.main) return all;
  for (const auto& [key, t] : tl.threads()) {
    if (t.pid != r.pid || t.tid == r.main_tid) continue;
    const HandOver handed = hand_over_of(t, r.main_tid);
    if (!handed_work(t, handed)) continue;
    auto eps = with_traffic(t, worker_episodes(t, handed));
    all.insert(all.end(), eps.begin(), eps.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<Interval> merged;
  for (const auto& iv : all) {
    if (!merged.empty() && iv.first <= merged.back().second) merged.back().second = std::max(merged.back().second, iv.second);
    else merged.push_back(iv);
  }
  return merged;
}

}  // namespace steptrace::steps
