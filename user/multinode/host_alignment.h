// SPDX-License-Identifier: Apache-2.0
// Putting captures from several hosts on one time line: each host's
// CLOCK_MONOTONIC (what every record is stamped with) mapped to job time,
// which is the wall clock (ns since the epoch) as the host's clock anchors
// place it (util/clock_anchor.h, pipeline/clock_notes.h).
//
// Two captures from the same boot (same boot id) share one monotonic clock:
// the second is mapped exactly as the first, with no error added between
// them. Otherwise each host's own anchors map it, and the error between two
// hosts is the sum of their anchors' reading bounds and their wall clocks'
// disagreement, which a capture cannot measure (NTP: ~1 ms; PTP: tens of us).
// Refining that from matched network bytes is not built (docs/multi-node.md).
#pragma once

#include <cstdint>
#include <string>

#include "util/clock_anchor.h"

namespace steptrace {

enum class AlignmentMethod : uint8_t {
  same_boot,         // the same monotonic clock as an earlier host: exact
  anchors,           // this host's clock anchors (first to last)
  network,           // the anchors, then the bytes it exchanged with an aligned host (stream_match.h)
  start_offset,      // one wall-clock offset read at the start (captures without anchors)
  none,              // nothing to align by: monotonic times used as they are
};

std::string_view alignment_method_name(AlignmentMethod m);

struct HostAlignment {
  AlignmentMethod method = AlignmentMethod::none;
  int same_boot_as = -1;     // same_boot: the host it shares a clock with
  int64_t offset_ns = 0;     // job time at mono_origin_ns minus mono_origin_ns
  uint64_t mono_origin_ns = 0;
  double drift_ppm = 0;      // the wall clock's rate against this host's monotonic clock
  // What the mapping itself may be off by (the anchors' reading bounds, or
  // 0 for the same boot); the hosts' wall clocks' own disagreement is on top.
  uint64_t reading_bound_ns = 0;
  bool wall_clock_stepped = false;  // the anchors saw a step: the first anchor's offset is used before it
  // The wall clock's own error against true time, as its kernel stated it
  // (ClockAnchors::worst_wall_error_us; -1 not stated), and whether it was
  // unsynchronized at an anchor (then unbounded).
  int64_t wall_max_error_us = -1;
  bool wall_unsynced = false;
  size_t anchors = 0;

  // network: a correction on top of the anchors' job time j, fitted to the
  // bytes exchanged with host `net_peer`: + net_offset_ns + (j -
  // net_origin_ns) * net_drift_ppm. Within +-net_bound_ns of the peer's job
  // time (the peer's own bound included) at the fitted drift.
  int net_peer = -1;
  int64_t net_offset_ns = 0;
  int64_t net_origin_ns = 0;
  double net_drift_ppm = 0;
  uint64_t net_bound_ns = 0;
  size_t net_lower = 0, net_upper = 0;  // exchanges that bound it from below (peer -> here) and from above

  int64_t anchored_job_ns(uint64_t mono_ns) const {
    const double since = static_cast<double>(static_cast<int64_t>(mono_ns - mono_origin_ns));
    return static_cast<int64_t>(mono_ns) + offset_ns + static_cast<int64_t>(since * drift_ppm * 1e-6);
  }
  int64_t to_job_ns(uint64_t mono_ns) const {
    const int64_t j = anchored_job_ns(mono_ns);
    if (net_peer < 0) return j;
    return j + net_offset_ns + static_cast<int64_t>(static_cast<double>(j - net_origin_ns) * net_drift_ppm * 1e-6);
  }
};

// A host's mapping from its anchors (or its start offset when it has none).
HostAlignment align_by_anchors(const ClockAnchors& anchors, int64_t start_offset_ns);

}  // namespace steptrace
