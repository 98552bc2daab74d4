// SPDX-License-Identifier: Apache-2.0
// Restores global timestamp order. Records from different CPUs reach the
// shared ring in reserve order, which can trail their timestamps by a few
// microseconds; holding back everything newer than (newest - horizon) and
// releasing the rest in timestamp order gives the timeline an ordered stream.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>

#include "decode/event.h"

namespace steptrace {

class Reorderer {
 public:
  explicit Reorderer(uint64_t horizon_ns = 5'000'000) : horizon_ns_(horizon_ns) {}

  void push(const Event& e) {
    uint64_t ts = header_of(e).ts_ns;
    if (ts > newest_) newest_ = ts;
    if (pending_.empty() || pending_.back().ts <= ts) {
      pending_.push_back(Held{ts, e});
      return;
    }
    // Out of order: after every held event with a timestamp <= this one, so
    // equal timestamps leave in the order they came.
    auto at = std::upper_bound(pending_.begin(), pending_.end(), ts,
                               [](uint64_t t, const Held& h) { return t < h.ts; });
    pending_.insert(at, Held{ts, e});
  }

  // Deliver every event at least `horizon` older than the newest seen.
  template <typename Fn>
  void release(Fn&& fn) {
    if (newest_ < horizon_ns_) return;
    deliver_upto(newest_ - horizon_ns_, fn);
  }

  template <typename Fn>
  void flush(Fn&& fn) {
    deliver_upto(UINT64_MAX, fn);
  }

  size_t pending() const { return pending_.size(); }
  uint64_t late() const { return late_; }

 private:
  // The held events, kept sorted by timestamp (arrival order among equals).
  // Records reach the ring nearly in order - one from another CPU trails by
  // microseconds - so almost every push appends, and a late one is inserted
  // a few places from the back: a deque moves only the elements between it
  // and the nearer end. (A binary heap cost O(log n) moves of a ~100-byte
  // event per push and per release: 36 % of the consumer's CPU at 0.9 M
  // records/s, B5. Sorting everything held at every release, before that,
  // made a replay quadratic in the records per horizon.)
  struct Held {
    uint64_t ts;
    Event e;
  };

  template <typename Fn>
  void deliver_upto(uint64_t cutoff, Fn& fn) {
    while (!pending_.empty() && pending_.front().ts <= cutoff) {
      Held h = std::move(pending_.front());
      pending_.pop_front();
      // An event older than one already delivered arrived too late for the horizon: count it.
      if (h.ts < last_delivered_) ++late_;
      else last_delivered_ = h.ts;
      fn(h.e);
    }
  }

  uint64_t horizon_ns_;
  uint64_t newest_ = 0;
  uint64_t last_delivered_ = 0;
  uint64_t late_ = 0;
  std::deque<Held> pending_;
};

}  // namespace steptrace
