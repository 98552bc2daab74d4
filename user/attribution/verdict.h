// SPDX-License-Identifier: Apache-2.0
// The verdict: which category gates the accelerator in this window, how
// sure we are, the evidence behind it and what to do about it.
#pragma once

#include "attribution/job_analysis.h"

namespace steptrace {

Verdict decide_verdict(const JobAnalysis& job, const TimelineStore& tl, const DropStats& drops);

// After the verdict: which device signals it had (job.signals), and what
// they say - evidence lines, and the headline's NDS / network-bound notes.
void annotate_verdict_with_signals(JobAnalysis& job);

}  // namespace steptrace
