// SPDX-License-Identifier: Apache-2.0
// Restores global timestamp order. Records from different CPUs reach the
// shared ring in reserve order, which can trail their timestamps by a few
// microseconds; holding back everything newer than (newest - horizon) and
// releasing the rest in timestamp order gives the timeline an ordered stream.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "decode/event.h"

namespace steptrace {

class Reorderer {
 public:
  explicit Reorderer(uint64_t horizon_ns = 5'000'000) : horizon_ns_(horizon_ns) {}

  void push(const Event& e) { push(e, header_of(e).ts_ns); }
  // ts: e's timestamp, where the caller has it already (a visit less per record).
  void push(const Event& e, uint64_t ts) {
    if (ts > newest_) newest_ = ts;
    if (pending() == 0 || held_.back().ts <= ts) {
      held_.push_back(Held{ts, e});
      return;
    }
    // Out of order: after every held event with a timestamp <= this one, so
    // equal timestamps leave in the order they came.
    auto at = std::upper_bound(held_.begin() + static_cast<std::ptrdiff_t>(head_), held_.end(), ts,
                               [](uint64_t t, const Held& h) { return t < h.ts; });
    held_.insert(at, Held{ts, e});
  }

  // Deliver every event at least `horizon` older than the newest seen, to
  // fn(event) or fn(event, its timestamp).
  template <typename Fn>
  void release(Fn&& fn) {
    if (newest_ < horizon_ns_) return;
    deliver_upto(newest_ - horizon_ns_, fn);
  }

  template <typename Fn>
  void flush(Fn&& fn) {
    deliver_upto(UINT64_MAX, fn);
  }

  size_t pending() const { return held_.size() - head_; }
  uint64_t late() const { return late_; }

 private:
  // The held events, kept sorted by timestamp (arrival order among equals).
  // Records reach the ring nearly in order - one from another CPU trails by
  // microseconds - so almost every push appends, and a late one is inserted
  // a few places from the back, moving only the elements after it. (A binary
  // heap cost O(log n) moves of a ~100-byte event per push and per release:
  // 36 % of the consumer's CPU at 0.9 M records/s, B5. Sorting everything
  // held at every release, before that, made a replay quadratic in the
  // records per horizon.) The events are held in one vector from head_ on:
  // a release advances head_ and the space before it is reclaimed in one
  // move once it is the larger part, so the vector's memory is reused, where
  // a deque allocated and freed a 512-byte node every four events.
  struct Held {
    uint64_t ts;
    Event e;
  };

  template <typename Fn>
  void deliver_upto(uint64_t cutoff, Fn& fn) {
    while (head_ < held_.size() && held_[head_].ts <= cutoff) {
      const Held& h = held_[head_++];  // fn must not push: it would move held_
      // An event older than one already delivered arrived too late for the horizon: count it.
      if (h.ts < last_delivered_) ++late_;
      else last_delivered_ = h.ts;
      if constexpr (std::is_invocable_v<Fn&, const Event&, uint64_t>) fn(h.e, h.ts);
      else fn(h.e);
    }
    if (head_ == held_.size()) {
      held_.clear();
      head_ = 0;
    } else if (head_ >= 1024 && head_ * 2 >= held_.size()) {
      held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

  uint64_t horizon_ns_;
  uint64_t newest_ = 0;
  uint64_t last_delivered_ = 0;
  uint64_t late_ = 0;
  std::vector<Held> held_;  // sorted from head_ on
  size_t head_ = 0;
};

}  // namespace steptrace
