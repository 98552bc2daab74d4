// SPDX-License-Identifier: Apache-2.0
// `steptrace report FILE`: a capture through the same Pipeline as live tracing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/analysis.h"
#include "util/result.h"

namespace steptrace {

// A part of a capture: records from `from_ns` to `to_ns` after its first
// record (or, `absolute`, CLOCK_MONOTONIC times); user notes are always kept.
// The analysis sees only that part, as an attach at from_ns would.
struct TimeCut {
  uint64_t from_ns = 0;
  uint64_t to_ns = UINT64_MAX;
  bool absolute = false;
  bool active() const { return from_ns > 0 || to_ns != UINT64_MAX; }
};

// What a replay keeps beyond a report's needs.
struct ReplayKeeps {
  bool stream_marks = false;  // TCP calls' stream positions (Analysis::streams), for a merge across hosts
};

Result<SessionReport> replay_capture(const std::string& path, const WindowPolicy& windows = {},
                                     const TimeCut& cut = {}, const ReplayKeeps& keeps = {});
// Same, over capture bytes in memory (the report fuzzer).
Result<SessionReport> replay_capture_bytes(const uint8_t* data, size_t size);

}  // namespace steptrace
