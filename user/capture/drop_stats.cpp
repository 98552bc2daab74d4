// SPDX-License-Identifier: Apache-2.0
#include "capture/drop_stats.h"

#include <fmt/core.h>

#include <algorithm>

namespace steptrace {

uint64_t DropStats::total_emitted() const {
  uint64_t t = 0;
  for (auto v : emitted) t += v;
  return t;
}

uint64_t DropStats::total_dropped() const {
  uint64_t t = 0;
  for (auto v : dropped) t += v;
  return t;
}

uint64_t DropStats::attribution_losses() const {
  uint64_t t = 0;
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    if (loss_affects_attribution(k)) t += losses[k];
  return t;
}

DropStats& DropStats::operator+=(const DropStats& o) {
  for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
    emitted[k] += o.emitted[k];
    dropped[k] += o.dropped[k];
  }
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) losses[k] += o.losses[k];
  // Not measurable anywhere beats measured; measured beats not attached.
  if (o.kretprobe == LossMeasure::not_measurable || kretprobe == LossMeasure::not_attached) kretprobe = o.kretprobe;
  return *this;
}

DropStats DropStats::since(const DropStats& base) const {
  DropStats d = *this;
  auto sub = [](uint64_t a, uint64_t b) { return a - std::min(a, b); };
  for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
    d.emitted[k] = sub(emitted[k], base.emitted[k]);
    d.dropped[k] = sub(dropped[k], base.dropped[k]);
  }
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) d.losses[k] = sub(losses[k], base.losses[k]);
  return d;
}

namespace {
struct LossInfo {
  std::string_view name, text;
  bool attribution;
};
// Indexed by enum st_loss_kind.
constexpr LossInfo kLosses[ST_LOSS_KIND_MAX] = {
    {"fork_target_full", "new processes not followed (target map full)", true},
    {"block_rq_full", "block requests not tracked (request map full)", true},
    {"sock_evicted", "sockets evicted from the socket map (later retransmits/state changes unattributed)", true},
    // Only the daemon's per-process counters (level aggregated and up); no verdict comes from them.
    {"agg_evicted", "per-process aggregates evicted (their counts restart)", false},
    {"kretprobe_missed", "kretprobe returns missed (calls without a record)", true},
    {"target_add_failed", "processes that could not be added to the target set", true},
    // Counted and reported, but not a reason for INCOMPLETE: most skipped runs are of
    // hooks whose record the analysis does not need (a non-target's nested completion).
    {"prog_missed", "hook runs the kernel skipped (the same BPF program already running on that CPU)", false},
};
}  // namespace

std::string_view loss_name(int kind) {
  return kind >= 0 && kind < ST_LOSS_KIND_MAX ? kLosses[kind].name : std::string_view("unknown");
}
std::string_view loss_text(int kind) {
  return kind >= 0 && kind < ST_LOSS_KIND_MAX ? kLosses[kind].text : std::string_view("unknown loss");
}
bool loss_affects_attribution(int kind) { return kind >= 0 && kind < ST_LOSS_KIND_MAX && kLosses[kind].attribution; }

std::string_view loss_measure_name(LossMeasure m) {
  switch (m) {
    case LossMeasure::measured: return "measured";
    case LossMeasure::not_measurable: return "not_measurable";
    case LossMeasure::not_attached: break;
  }
  return "not_attached";
}

std::string incomplete_reason(const DropStats& d) {
  std::string o;
  if (d.total_dropped() > 0) o = fmt::format("the kernel dropped {} events", d.total_dropped());
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) {
    if (!loss_affects_attribution(k) || d.losses[k] == 0) continue;
    o += fmt::format("{}{} {}", o.empty() ? "" : "; ", d.losses[k], loss_text(k));
  }
  return o;
}

}  // namespace steptrace
