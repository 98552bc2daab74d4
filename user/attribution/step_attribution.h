// SPDX-License-Identifier: Apache-2.0
// One step's wall time split into categories: the main thread's state
// segments and spans inside the step are painted by priority (execution,
// submission, collective, data loading, host overhead, CPU contention).
#pragma once

#include <cstdint>
#include <vector>

#include "attribution/interval_painter.h"
#include "attribution/job_analysis.h"
#include "steps/rank_steps.h"

namespace steptrace {

// Typical device time of one execution (last queue kick to completion), from
// the bounds every execution puts on it; 0 (unknown) with fewer than 3.
uint64_t estimate_device_ns(const ThreadTimeline& t, const std::vector<steps::Anchor>& anchors);

// Fills st.ns, the data-loading split, copies and the arrival at the
// collective for step [st.start_ns, st.end_ns) of rank r.
// `paints_out`, when given, receives the paints the step was split with (the
// stack samples of its main thread are classified by them).
void attribute_step(const steps::RankSteps& r, uint64_t typical_device_ns, StepResult& st,
                    std::vector<Paint>* paints_out = nullptr);

}  // namespace steptrace
