// SPDX-License-Identifier: Apache-2.0
// `steptrace report FILE`: a capture through the same Pipeline as live tracing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/analysis.h"
#include "util/result.h"

namespace steptrace {

Result<SessionReport> replay_capture(const std::string& path, const WindowPolicy& windows = {});
// Same, over capture bytes in memory (the report fuzzer).
Result<SessionReport> replay_capture_bytes(const uint8_t* data, size_t size);

}  // namespace steptrace
