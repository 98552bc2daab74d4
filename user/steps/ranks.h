// SPDX-License-Identifier: Apache-2.0
// Which processes are ranks, their main thread, their loaders, and the
// source their steps come from.
#pragma once

#include <vector>

#include "steps/rank_steps.h"

namespace steptrace::steps {

// Processes whose best thread drives the accelerator or marks steps, with
// their anchors (runtime probes or queue kicks) and loaders; unsorted.
std::vector<RankSteps> accelerator_ranks(const TimelineStore& tl, const ThreadTable& threads);

// A job with no accelerator and no marker: processes that carry periodic
// collective traffic, with the collective's bursts as anchors (cut with the
// burst model in `known` for a pid that has one).
std::vector<RankSteps> host_only_ranks(const TimelineStore& tl, const ThreadTable& threads,
                                       const std::map<uint32_t, BurstModel>& known);

// Loader workers: child processes of the rank and the rank's other threads
// (except those that move the collective's bytes). Needs r.pid and r.main.
void add_loaders(const TimelineStore& tl, RankSteps& r);

}  // namespace steptrace::steps
