// SPDX-License-Identifier: Apache-2.0
// `steptrace report A.cap B.cap ... --perfetto F`: every host's trace (the
// one-host `--perfetto` of its capture, export/perfetto.h) on the job's one
// time line. Each host's timestamps go through its clock mapping
// (host_alignment.h: anchors, then the network), so a step that one
// collective ends on every host ends at the same place on the screen,
// within the alignment's bound. Processes are kept apart per host (its pids
// moved by host * 2^22, the kernel's pid limit) and named "host N
// (hostname): ..."; flow and async ids likewise.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "multinode/job_merge.h"

namespace steptrace {

// Timestamps: microseconds since the earliest host's window start, on the
// job's time line. Needs every input's timeline (the merge alone does not).
nlohmann::json job_perfetto_trace(const JobReport& job, const std::vector<JobInput>& inputs);

}  // namespace steptrace
