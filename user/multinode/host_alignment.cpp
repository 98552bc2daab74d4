// SPDX-License-Identifier: Apache-2.0
#include "multinode/host_alignment.h"

#include <algorithm>

namespace steptrace {

std::string_view alignment_method_name(AlignmentMethod m) {
  switch (m) {
    case AlignmentMethod::same_boot: return "same_boot";
    case AlignmentMethod::anchors: return "wall_clock_anchors";
    case AlignmentMethod::network: return "network";
    case AlignmentMethod::start_offset: return "wall_clock_start_offset";
    case AlignmentMethod::none: break;
  }
  return "none";
}

HostAlignment align_by_anchors(const ClockAnchors& anchors, int64_t start_offset_ns) {
  HostAlignment a;
  a.anchors = anchors.count();
  if (anchors.count() == 0 || !anchors.first().valid()) {
    if (start_offset_ns == 0) return a;
    a.method = AlignmentMethod::start_offset;
    a.offset_ns = start_offset_ns;
    return a;
  }
  a.method = AlignmentMethod::anchors;
  const ClockAnchor& f = anchors.first();
  a.mono_origin_ns = f.mono_ns;
  a.offset_ns = f.offset_ns();
  a.reading_bound_ns = std::max(anchors.widest_bound_ns(), anchors.tightest_bound_ns());
  a.wall_clock_stepped = !anchors.steps().empty() || anchors.steps_over_cap() > 0;
  a.wall_max_error_us = anchors.worst_wall_error_us();
  a.wall_unsynced = anchors.unsynced() > 0;
  // Between the first and the last anchor the wall clock moved against the
  // monotonic clock at the slew rate (NTP slews both together, so it is
  // near 0); a stepped clock keeps the first anchor's offset: wall times
  // after a step are off by it, and the terminal report says so.
  if (!a.wall_clock_stepped) a.drift_ppm = anchors.slew_ppm();
  return a;
}

}  // namespace steptrace
