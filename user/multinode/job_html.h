// SPDX-License-Identifier: Apache-2.0
// `steptrace report A.cap B.cap ... --html FILE`: the merged job as one
// self-contained page (no network). The verdict, evidence, clocks, nodes and
// ranks are plain HTML (readable without scripts); a timeline draws every
// host's ranks on the job's one clock, each step coloured by what gated it,
// from the steps embedded as JSON.
#pragma once

#include <string>

#include "multinode/job_merge.h"

namespace steptrace {

// At most this many steps per rank are drawn (evenly thinned past it).
inline constexpr size_t kJobHtmlStepsPerRank = 4000;

std::string job_html(const JobReport& job);

}  // namespace steptrace
