// SPDX-License-Identifier: Apache-2.0
// Restores global timestamp order. Records from different CPUs reach the
// shared ring in reserve order, which can trail their timestamps by a few
// microseconds; holding back everything newer than (newest - horizon) and
// releasing the rest in timestamp order gives the timeline an ordered stream.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "decode/event.h"

namespace steptrace {

class Reorderer {
 public:
  explicit Reorderer(uint64_t horizon_ns = 5'000'000) : horizon_ns_(horizon_ns) {}

  void push(const Event& e) {
    uint64_t ts = header_of(e).ts_ns;
    if (ts > newest_) newest_ = ts;
    pending_.push_back(Held{ts, seq_++, e});
    std::push_heap(pending_.begin(), pending_.end(), later);
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
  // A min-heap on (timestamp, arrival): events leave in timestamp order and,
  // at equal timestamps, in the order they came (what a stable sort of the
  // held events gives), at O(log n) each however often release() is called.
  // (Sorting everything held at every release made a replay, which releases
  // after each record, quadratic in the records per horizon.)
  struct Held {
    uint64_t ts;
    uint64_t seq;
    Event e;
  };
  static bool later(const Held& a, const Held& b) { return a.ts != b.ts ? a.ts > b.ts : a.seq > b.seq; }

  template <typename Fn>
  void deliver_upto(uint64_t cutoff, Fn& fn) {
    while (!pending_.empty() && pending_.front().ts <= cutoff) {
      std::pop_heap(pending_.begin(), pending_.end(), later);
      Held h = std::move(pending_.back());
      pending_.pop_back();
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
  uint64_t seq_ = 0;
  std::vector<Held> pending_;
};

}  // namespace steptrace
