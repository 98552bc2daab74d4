// SPDX-License-Identifier: Apache-2.0
// The device signals' job-level summary (NDS means, the network-bound test,
// the proxies' delay and who preempted them), added up from what the pass
// (attribution/device_signal_pass.h) wrote into each step's `dev`. Because
// every term is in the steps, a long session's merged analysis
// (pipeline/step_ledger.h) sums the steps of every folded window.
#pragma once

#include <vector>

#include "attribution/job_analysis.h"
#include "signals/step_signals.h"

namespace steptrace {

// The summary's step figures over `ranks` (a rank's proxies: S.proxies'),
// counted steps from `skip` on; sources, device memory and sysfs are left as they are.
void summarize_device_signal_steps(const std::vector<const RankResult*>& ranks, int skip, const ThreadTable& threads,
                                   signals::DeviceSignalsSummary& S);

// The same over the job's ranks: a long session's merged analysis holds the
// folded windows' steps, so its figures are over every step kept in detail,
// not the last window's. job.signals.proxies must name every rank's proxies
// (the ledger keeps those of folded windows).
void resummarize_device_signals(JobAnalysis& job, const ThreadTable& threads);

}  // namespace steptrace
