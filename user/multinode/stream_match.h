// SPDX-License-Identifier: Apache-2.0
// Hosts' clocks against each other from the bytes they exchanged. A byte
// sent by host A (copied in during its send call, which started at s) and
// received by host B (read by a receive call that ended at r) was sent
// before it was received, so
//     B's clock at r + correction  >=  A's clock at s,
// a bound on B's correction from one side; bytes B sent to A bound it from
// the other. Over many exchanges (NTP's idea, every TCP call an exchange)
// the correction is a line (offset and residual drift against the wall
// clocks' alignment) inside the band the two sets of bounds leave; the
// fitted line is the middle of the widest band and the bound is half its
// width: the tightest pair of exchanges around each moment, typically the
// transit and wake-up time of one message (tens of microseconds on a LAN),
// where the wall clocks alone are off by as much as NTP leaves them
// (milliseconds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "multinode/host_alignment.h"
#include "timeline/stream_marks.h"

namespace steptrace {

struct StreamFit {
  bool ok = false;
  std::string why_not;      // when !ok: what was missing or contradictory
  int64_t offset_ns = 0;    // the correction at origin_ns
  int64_t origin_ns = 0;    // the host's anchored job time the line is centred on
  double drift_ppm = 0;     // the correction's slope
  uint64_t bound_ns = 0;    // half the band's width at that slope
  size_t lower = 0, upper = 0;  // exchanges peer -> host (bound from below) and host -> peer (from above)
  size_t flows = 0;             // byte streams with marks on both hosts
};

// The correction to add to `host`'s anchored job time (HostAlignment::
// anchored_job_ns) to put it on `peer`'s job time (HostAlignment::to_job_ns).
StreamFit fit_stream_offset(const std::vector<StreamMark>& host, const HostAlignment& host_clock,
                            const std::vector<StreamMark>& peer, const HostAlignment& peer_clock);

// Every host on its own clock (not the first such, not the same boot as
// another) fitted to an aligned host it exchanged bytes with, nearest first:
// the first such host is the reference; a host fitted to a fitted host adds
// that host's bound. Hosts of one boot share their partner's correction.
// `why_not[h]` says why host h kept its anchors ("" when fitted or not
// needed).
void refine_by_streams(std::vector<HostAlignment>& clocks, const std::vector<const StreamMarks*>& marks,
                       std::vector<std::string>& why_not);

}  // namespace steptrace
