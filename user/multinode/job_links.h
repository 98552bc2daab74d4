// SPDX-License-Identifier: Apache-2.0
// The links between the job's hosts, as each host's adapters measured them
// (EFA counters in its capture): what the collective achieved against the
// link's rate. The merged report uses it as evidence where the ranks' time
// goes to the collective and no rank holds the others back: then the link
// itself may be what the job waits for.
#pragma once

#include <string>

#include "multinode/job_merge.h"

namespace steptrace {

// What one host's capture says of its adapters (HostLink::why_not when it
// says nothing).
HostLink host_link(const SessionReport& r);

// The links' lines in job.evidence, and the headline's "network-bound" where
// the collective is what the ranks wait for and no rank is to blame.
void link_evidence(JobReport& job);

}  // namespace steptrace
