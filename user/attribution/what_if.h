// SPDX-License-Identifier: Apache-2.0
// What-if per step: from each step's critical path across ranks
// (attribution/what_if_model.h), the predicted step time if one thing were
// removed or brought to the median - each host-side category on each rank
// and on every rank, the straggler at the median of the others, DMA
// submission overlapped with device compute, the collective at the link's
// rate - ranked by the mean saving. Large costs whose removal would save
// less than 1 % of the step are named as such: off the critical path
// (other ranks arrive later, or the loaders keep ahead of the main thread).
#pragma once

#include "attribution/job_analysis.h"

namespace steptrace {

// From a judged analysis (the verdict's straggler and the device signals
// are read).
WhatIfReport what_if(const JobAnalysis& job);

// The top fix (and one cost whose fix would not help) as evidence; the advice
// gets the predicted saving when the top fix is what it advises.
void annotate_verdict_with_what_if(JobAnalysis& job);

}  // namespace steptrace
