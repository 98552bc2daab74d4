// SPDX-License-Identifier: Apache-2.0
// Pieces of the network-bound test (attribution/device_signal_pass.cpp):
// bytes against collective time per path over a window, with stalls left
// out, and when the last rank arrived at each step's collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace steptrace {

struct RankResult;

// Window totals per path (host messages, device RDMA, any traffic): bytes
// and collective time. A counter update that lands just after a step
// boundary moves bytes between neighbouring steps but not out of the
// window, so the window's rate is what the network-bound test uses.
// A step whose collective on this path stalled (a descheduled rank, a
// paused VM: over 3x the rank's median time on the path) is left out with
// its bytes, as the medians elsewhere keep one stall from flipping the whole
// window. Per rank: a late rank's collectives are short by nature.
struct PathTotal {
  struct Step {
    size_t rank;
    double link_seconds, seconds;  // bytes at the link rate; collective time
  };
  std::vector<Step> steps;

  // Achieved / link rate over the steps that did not stall; -1 none.
  double ratio() const;
};

// Per rank and step, when the last rank arrived at that step's collective
// (the ranks' steps paired by the collective's exit, attribution/step_pairing.h);
// 0 where a rank has no arrival or no paired step. Empty with a single rank.
std::vector<std::vector<uint64_t>> last_arrivals(const std::vector<RankResult*>& ranks);

}  // namespace steptrace
