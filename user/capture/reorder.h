// SPDX-License-Identifier: Apache-2.0
// Restores global timestamp order. Records from different CPUs reach the
// shared ring in reserve order, which can trail their timestamps by a few
// microseconds; holding back everything newer than (newest - horizon) and
// sorting the rest gives the timeline a strictly ordered stream.
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
    pending_.push_back(e);
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
  template <typename Fn>
  void deliver_upto(uint64_t cutoff, Fn& fn) {
    std::stable_sort(pending_.begin(), pending_.end(), [](const Event& a, const Event& b) {
      return header_of(a).ts_ns < header_of(b).ts_ns;
    });
    size_t n = 0;
    while (n < pending_.size() && header_of(pending_[n]).ts_ns <= cutoff) {
      const Event& e = pending_[n];
      // An event older than one already delivered arrived too late for the horizon: count it.
      if (header_of(e).ts_ns < last_delivered_) ++late_;
      else last_delivered_ = header_of(e).ts_ns;
      fn(e);
      ++n;
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  uint64_t horizon_ns_;
  uint64_t newest_ = 0;
  uint64_t last_delivered_ = 0;
  uint64_t late_ = 0;
  std::vector<Event> pending_;
};

}  // namespace steptrace
