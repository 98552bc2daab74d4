// SPDX-License-Identifier: Apache-2.0
// What the kernel side lost: ring-buffer drops per event kind and the BPF-side
// losses (full maps, evictions, kretprobe misses), with their names for
// trailers, reports and metrics. Passive data: the analysis, the capture
// reader and every sink use it without the BPF loader (no libbpf).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "steptrace_abi.h"

namespace steptrace {

// Whether a loss kind could be measured in this session.
enum class LossMeasure : uint8_t {
  measured = 0,
  not_attached = 1,    // nothing that could lose it ran (no kretprobe tier)
  not_measurable = 2,  // it ran, but this kernel cannot say (kretprobe misses before 6.7)
};

struct DropStats {
  uint64_t emitted[ST_EV_KIND_MAX] = {};
  uint64_t dropped[ST_EV_KIND_MAX] = {};
  uint64_t losses[ST_LOSS_KIND_MAX] = {};  // enum st_loss_kind
  LossMeasure kretprobe = LossMeasure::not_attached;  // ST_LOSS_KRETPROBE_MISSED
  uint64_t total_emitted() const;
  uint64_t total_dropped() const;
  // Losses that leave a traced task's time or events unattributed.
  uint64_t attribution_losses() const;
  // Events dropped or attribution lost: the verdict is INCOMPLETE.
  bool incomplete() const { return total_dropped() > 0 || attribution_losses() > 0; }
  // Counters of another tracer (the daemon rebuilds them) added to these.
  DropStats& operator+=(const DropStats& o);
  // These counters since `base` (an earlier read of the same tracer).
  DropStats since(const DropStats& base) const;
};


// Stable names of the loss kinds (capture trailers, reports, metrics).
std::string_view loss_name(int kind);
// What a loss of `kind` means, for people ("new processes not followed (target map full)").
std::string_view loss_text(int kind);
// Whether a loss of `kind` leaves traced work unattributed (then INCOMPLETE).
bool loss_affects_attribution(int kind);
// "measured", "not_attached", "not_measurable".
std::string_view loss_measure_name(LossMeasure m);
// One line for the report: "the kernel dropped 12 events; 3 new processes not followed (target map full)".
std::string incomplete_reason(const DropStats& d);

}  // namespace steptrace
