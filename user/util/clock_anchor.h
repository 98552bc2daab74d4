// SPDX-License-Identifier: Apache-2.0
// Clock anchors: where this host's CLOCK_MONOTONIC (every record's clock,
// bpf_ktime_get_ns) stood against its CLOCK_REALTIME, each pair read tightly
// and with its error bound. A session takes one at the start, one every
// kClockAnchorEveryNs and one at the end, and writes them into the record
// stream, so a capture can be placed on the wall clock - and captures of one
// job from several hosts against each other - with a stated bound, and a
// step of the wall clock (chrony or an operator setting the time) in the
// middle of a recording is seen instead of silently shifting what follows.
//
// Under NTP the monotonic clock is slewed along with the wall clock, never
// stepped, so REALTIME - MONOTONIC changes only when the wall clock is
// stepped (clock_gettime(2)); between steps it stays within the slew limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace steptrace {

inline constexpr uint64_t kClockAnchorEveryNs = 10'000'000'000ull;

struct ClockAnchor {
  uint64_t mono_ns = 0;   // CLOCK_MONOTONIC, the middle of the tightest bracket
  int64_t real_ns = 0;    // CLOCK_REALTIME read inside that bracket
  uint32_t bound_ns = 0;  // real_ns is REALTIME at mono_ns within +-bound_ns
  // What the kernel says of the wall clock itself (adjtimex(2), as the NTP
  // daemon set it): its maximum error against true time in us (-1: not
  // known), and whether it is synchronized at all.
  int64_t wall_max_error_us = -1;
  bool wall_unsynced = false;
  int64_t offset_ns() const { return real_ns - static_cast<int64_t>(mono_ns); }
  bool valid() const { return mono_ns != 0 && real_ns != 0; }
};

// Reads MONOTONIC, REALTIME, MONOTONIC `tries` times and keeps the narrowest
// bracket (a preemption or an interrupt between the reads widens one; the
// fastest of several is what chrony keeps of a PHC too). The bound is half
// the bracket. Then adjtimex(2) for the wall clock's own error.
ClockAnchor take_clock_anchor(int tries = 10);

// A wall-clock step between two anchors: REALTIME - MONOTONIC moved by more
// than both bounds plus what a slewing NTP daemon can move it in the time
// between (kMaxSlewPpm, the kernel's limit on a frequency adjustment).
inline constexpr double kMaxSlewPpm = 500;
struct WallClockStep {
  uint64_t after_mono_ns = 0;   // the anchor before the step
  uint64_t before_mono_ns = 0;  // the anchor after it
  int64_t step_ns = 0;          // how far the wall clock moved beyond the slew limit's allowance, signed
};
// The step between a and b (a earlier), if there was one.
bool wall_clock_stepped(const ClockAnchor& a, const ClockAnchor& b, WallClockStep* step);

// Every anchor a session saw, summarised in bounded memory (a week of
// anchors every 10 s is 60 k; only the first, the last, the tightest and the
// steps are kept).
class ClockAnchors {
 public:
  static constexpr size_t kMaxSteps = 64;
  // Anchors out of time order (a replayed note before one already seen) are
  // counted, not used: the summary's steps are between neighbours.
  void add(const ClockAnchor& a);
  size_t count() const { return count_; }
  const ClockAnchor& first() const { return first_; }
  const ClockAnchor& last() const { return last_; }
  uint32_t tightest_bound_ns() const { return tightest_; }
  uint32_t widest_bound_ns() const { return widest_; }
  const std::vector<WallClockStep>& steps() const { return steps_; }
  uint64_t steps_over_cap() const { return steps_over_cap_; }
  uint64_t out_of_order() const { return out_of_order_; }
  // The wall clock's rate against the monotonic clock over the intervals
  // between anchors that hold no step, in ppm (0 with no such interval).
  // Monotonic being slewed with it, this is near 0 under NTP.
  double slew_ppm() const;
  // The wall clock's largest stated maximum error over the anchors (-1: no
  // anchor said), and the anchors taken while it was not synchronized.
  int64_t worst_wall_error_us() const { return worst_wall_error_us_; }
  size_t unsynced() const { return unsynced_; }

 private:
  size_t count_ = 0;
  ClockAnchor first_, last_;
  uint32_t tightest_ = 0, widest_ = 0;
  std::vector<WallClockStep> steps_;
  uint64_t steps_over_cap_ = 0, out_of_order_ = 0;
  // What REALTIME - MONOTONIC moved over the intervals without a step, and
  // their length (slew_ppm).
  int64_t slew_moved_ns_ = 0;
  uint64_t slew_span_ns_ = 0;
  int64_t worst_wall_error_us_ = -1;
  size_t unsynced_ = 0;
};

}  // namespace steptrace
