// SPDX-License-Identifier: Apache-2.0
// A host that traces only some of a job's ranks: when the launcher says the
// job is bigger (WORLD_SIZE) and the ranks here wait in the collective with
// none of them late, they wait for a rank on another host. The one-host
// verdict says so, and how to find it (`report A.cap B.cap`, multinode/).
#pragma once

#include "attribution/job_analysis.h"
#include "pipeline/process_notes.h"

namespace steptrace {

void note_remote_ranks(JobAnalysis& job, const ProcessNotes& notes);

}  // namespace steptrace
