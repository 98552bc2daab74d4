// SPDX-License-Identifier: Apache-2.0
// `report A.cap B.cap ... --time FROM-TO | --steps A-B`: one span of the
// job's own clock, cut from every capture in its host's own monotonic time.
// The span comes from a first merge of the whole captures (which aligns the
// hosts' clocks); each capture is then replayed again within its cut and
// merged once more.
//   --time: seconds after the job's earliest recording start (every host's
//           start on the job clock);
//   --steps: from the start of step A to the end of step B of the job's
//           lowest-numbered rank (its own step count, as on one host).
#pragma once

#include <cstdint>
#include <vector>

#include "multinode/job_merge.h"
#include "pipeline/replay.h"
#include "util/result.h"

namespace steptrace {

struct JobCutSpec {
  double from_s = -1, to_s = -1;            // --time
  int64_t first_step = -1, last_step = -1;  // --steps
};

// One absolute cut per host of `job` (JobReport::hosts order). `first_ns`:
// each host's recording start on its own clock (SessionReport::window_start_ns).
Result<std::vector<TimeCut>> job_cuts(const JobReport& job, const std::vector<uint64_t>& first_ns,
                                      const JobCutSpec& spec);

// The host's monotonic time that its mapping puts at job time `job_ns`.
uint64_t host_time_of(const HostAlignment& clock, int64_t job_ns);

}  // namespace steptrace
