// SPDX-License-Identifier: Apache-2.0
// `--perfetto FILE`: the session as Chrome trace-event JSON, which
// ui.perfetto.dev (and chrome://tracing) open directly.
//
//   process track per rank ("rank N: comm pid"), its loader processes, other
//   traced processes;
//   thread tracks with scheduler-state slices (running / runnable / sleeping /
//   disk_wait), one slice per state segment;
//   a "steps" track per rank: one slice per step, the category breakdown (ms),
//   gating category and lateness as args;
//   a "calls" track per thread: ioctl, TCP send/recv and nrt_* runtime-call
//   slices (they nest: ioctls inside nrt_execute);
//   disk requests as async slices on their process;
//   counters: events emitted and dropped per class.
// Timestamps are microseconds since the start of the window.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeline/analysis.h"

namespace steptrace {

struct PerfettoOptions {
  size_t max_events = 4'000'000;  // state slices beyond this are dropped (and counted in metadata)
};

nlohmann::json perfetto_trace(const SessionReport& r, const PerfettoOptions& opt = {});

// Synthetic thread ids for the extra tracks (real tids are < 2^22).
inline constexpr uint64_t kStepsTrackTid = 1'000'000'000ull;  // + rank
inline constexpr uint64_t kCallsTrackTid = 2'000'000'000ull;  // + tid

}  // namespace steptrace
