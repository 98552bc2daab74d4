// SPDX-License-Identifier: Apache-2.0
// What the ranks of a job say about each other: arrival skew at a device
// collective, lateness and stragglers.
#pragma once

#include <vector>

#include "attribution/job_analysis.h"
#include "steps/rank_steps.h"

namespace steptrace {

// A rank under attribution: its steps' source (the steps stage) and results.
struct RankWork {
  const steps::RankSteps* steps = nullptr;
  RankResult res;
};

// Without device counters: the cross-rank arrival skew at executions that
// end together moves each rank's wait from device execute to collective.
void apply_device_skew(std::vector<RankWork>& ranks);

// Each step's lateness against the earliest rank, and straggler counts where
// a collective couples the ranks (steps before `skip` are not counted).
void cross_rank(std::vector<RankWork>& ranks, int skip);

}  // namespace steptrace
