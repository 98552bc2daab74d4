// SPDX-License-Identifier: Apache-2.0
// Device-signal attribution: the pass after step attribution that applies
// the sampled device counters (signals/signals_data.h, passive data) to the
// steps - NDS splits device execute into device compute and device
// collective, EFA gives bytes per step and the network-bound test, network
// proxy threads' run-queue delay. The verdict's lines about them:
// annotate_verdict_with_signals (attribution/verdict.h).
#pragma once

#include <vector>

#include "attribution/job_analysis.h"
#include "signals/signals_data.h"
#include "signals/step_signals.h"

namespace steptrace {

// Fills each step's `dev`, moves the NDS device-collective time from device
// execute to collective, and writes the summary. `data` null: nothing was
// sampled (a replay). Returns true when the NDS split was applied (the caller
// then skips the arrival-skew estimate). `known_proxies`: network proxies
// named by earlier windows of a long session (or null), measured here too.
bool apply_device_signals(std::vector<RankResult*>& ranks, const TimelineStore& tl, const ThreadTable& threads,
                          const signals::SignalsData* data, int skip_steps,
                          const std::vector<signals::ProxyThread>* known_proxies, signals::DeviceSignalsSummary* out);

}  // namespace steptrace
