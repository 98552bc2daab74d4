// SPDX-License-Identifier: Apache-2.0
#include "util/clock_anchor.h"

#include <sys/timex.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace steptrace {

namespace {

int64_t read_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000ll + ts.tv_nsec;
}

}  // namespace

ClockAnchor take_clock_anchor(int tries) {
  ClockAnchor best;
  int64_t best_width = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < std::max(1, tries); ++i) {
    const int64_t m0 = read_ns(CLOCK_MONOTONIC);
    const int64_t r = read_ns(CLOCK_REALTIME);
    const int64_t m1 = read_ns(CLOCK_MONOTONIC);
    const int64_t width = m1 - m0;
    if (width < 0 || width >= best_width) continue;
    best_width = width;
    best.mono_ns = static_cast<uint64_t>(m0 + width / 2);
    best.real_ns = r;
    // Half the bracket, rounded up: at least 1 ns, so a bound is never "exact".
    best.bound_ns = static_cast<uint32_t>(std::min<int64_t>(width / 2 + 1, std::numeric_limits<uint32_t>::max()));
  }
  timex tx{};  // modes 0: read only
  const int state = adjtimex(&tx);
  if (state >= 0) {
    best.wall_unsynced = state == TIME_ERROR || (tx.status & STA_UNSYNC);
    best.wall_max_error_us = tx.maxerror;
  }
  return best;
}

bool wall_clock_stepped(const ClockAnchor& a, const ClockAnchor& b, WallClockStep* step) {
  if (!a.valid() || !b.valid() || b.mono_ns < a.mono_ns) return false;
  const int64_t moved = b.offset_ns() - a.offset_ns();
  const double slew = kMaxSlewPpm * 1e-6 * static_cast<double>(b.mono_ns - a.mono_ns);
  const double allowed = static_cast<double>(a.bound_ns) + static_cast<double>(b.bound_ns) + slew;
  if (std::fabs(static_cast<double>(moved)) <= allowed) return false;
  if (step) {
    step->after_mono_ns = a.mono_ns;
    step->before_mono_ns = b.mono_ns;
    step->step_ns = moved;
  }
  return true;
}

void ClockAnchors::add(const ClockAnchor& a) {
  if (!a.valid()) return;
  if (count_ && a.mono_ns < last_.mono_ns) {
    ++out_of_order_;
    return;
  }
  if (!count_) {
    first_ = a;
    tightest_ = widest_ = a.bound_ns;
  } else {
    WallClockStep s;
    if (wall_clock_stepped(last_, a, &s)) {
      if (steps_.size() < kMaxSteps) steps_.push_back(s);
      else ++steps_over_cap_;
    } else {
      slew_moved_ns_ += a.offset_ns() - last_.offset_ns();
      slew_span_ns_ += a.mono_ns - last_.mono_ns;
    }
    tightest_ = std::min(tightest_, a.bound_ns);
    widest_ = std::max(widest_, a.bound_ns);
  }
  if (a.wall_unsynced) ++unsynced_;
  if (a.wall_max_error_us >= 0) worst_wall_error_us_ = std::max(worst_wall_error_us_, a.wall_max_error_us);
  last_ = a;
  ++count_;
}

double ClockAnchors::slew_ppm() const {
  if (!slew_span_ns_) return 0;
  return static_cast<double>(slew_moved_ns_) / static_cast<double>(slew_span_ns_) * 1e6;
}

}  // namespace steptrace
