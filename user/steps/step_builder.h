// SPDX-License-Identifier: Apache-2.0
// Cuts a rank's main thread into steps around its anchors or markers.
#pragma once

#include <cstdint>

#include "steps/rank_steps.h"

namespace steptrace::steps {

// Fills r.steps from r.source, r.anchors (or the main thread's markers) and
// the main thread's waits for its loaders.
void build_steps(RankSteps& r);

// Where a step begins between the end of the previous execution (lo) and the
// start of the next (hi): after the previous step's tail, at the first wait
// for a loader or, when the batch was ready, at the first input copy.
uint64_t find_boundary(const RankSteps& r, uint64_t lo, uint64_t hi);

// The same without executions (host_only): the first wait for a loader in
// [lo, hi), else lo.
uint64_t find_host_boundary(const RankSteps& r, uint64_t lo, uint64_t hi);

}  // namespace steptrace::steps
