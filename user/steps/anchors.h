// SPDX-License-Identifier: Apache-2.0
// Anchors: the once-per-step events a rank's steps are cut around, when no
// runtime probe marks executions - bursts of accelerator queue kicks, or in a
// CPU-only job the collective's traffic bursts.
#pragma once

#include <vector>

#include "steps/rank_steps.h"

namespace steptrace::steps {

// Executions from the main thread's ioctls: a burst of queue kicks starts
// one; the completion acknowledgement (or the next other ioctl) ends it.
std::vector<Anchor> anchors_from_ioctls(const ThreadTimeline& t);

// One burst of send/recv traffic per step across the threads of process
// `r.pid` (r.main and r.loaders must be set), chosen so the bursts carry
// (nearly) equal bytes. Empty with fewer than 8 calls or 3 bursts. With a
// `known` model (a later window of a long session) the bursts are cut with
// it; otherwise r.burst gets the model learned here, when the steps agree
// well enough to learn one.
std::vector<Anchor> collective_bursts(const TimelineStore& tl, RankSteps& r, const BurstModel* known);

}  // namespace steptrace::steps
