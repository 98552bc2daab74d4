// SPDX-License-Identifier: Apache-2.0
// `steptrace top`: the live view's command loop (the frames: export/top.h).
#pragma once

#include <atomic>

#include "cli/options.h"
#include "pipeline/analysis.h"
#include "util/result.h"

namespace steptrace {

// Runs a session with the live view until the job exits, the duration
// elapses or q is pressed (a stop: session.h request_stop), or a signal
// number lands in *signal; returns the final report.
Result<SessionReport> run_top(const Options& o, std::atomic<int>* signal);

}  // namespace steptrace
