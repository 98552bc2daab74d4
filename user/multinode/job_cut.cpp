// SPDX-License-Identifier: Apache-2.0
#include "multinode/job_cut.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>

namespace steptrace {

uint64_t host_time_of(const HostAlignment& clock, int64_t job_ns) {
  // The mapping is the identity plus an offset that changes by ppm: from
  // the offset at the mapping's origin, a few fixed-point steps settle to
  // the nanosecond.
  const uint64_t o = clock.mono_origin_ns;
  int64_t m = job_ns - (clock.to_job_ns(o) - static_cast<int64_t>(o));
  for (int i = 0; i < 4; ++i) {
    const int64_t err = clock.to_job_ns(static_cast<uint64_t>(std::max<int64_t>(m, 0))) - job_ns;
    if (err == 0) break;
    m -= err;
  }
  return static_cast<uint64_t>(std::max<int64_t>(m, 0));
}

Result<std::vector<TimeCut>> job_cuts(const JobReport& job, const std::vector<uint64_t>& first_ns,
                                      const JobCutSpec& spec) {
  if (first_ns.size() != job.hosts.size()) return make_error("job cut: one first record per host is needed");
  int64_t from = 0, to = 0;
  if (spec.from_s >= 0) {
    int64_t start = std::numeric_limits<int64_t>::max();
    for (size_t h = 0; h < job.hosts.size(); ++h) start = std::min(start, job.hosts[h].clock.to_job_ns(first_ns[h]));
    from = start + static_cast<int64_t>(spec.from_s * 1e9);
    to = start + static_cast<int64_t>(spec.to_s * 1e9);
  } else if (spec.first_step >= 0) {
    const JobRank* lowest = nullptr;
    for (const auto& r : job.ranks)
      if (r.res && (!lowest || r.global_rank < lowest->global_rank)) lowest = &r;
    bool have_from = false, have_to = false;
    if (lowest)
      for (const auto& st : lowest->res->steps) {
        const HostAlignment& clk = job.hosts[lowest->host].clock;
        if (static_cast<int64_t>(st.index) == spec.first_step) from = clk.to_job_ns(st.start_ns), have_from = true;
        if (static_cast<int64_t>(st.index) == spec.last_step) to = clk.to_job_ns(st.end_ns), have_to = true;
      }
    if (!have_from || !have_to || to <= from)
      return make_error(fmt::format("--steps {}-{}: rank {} does not have both steps in detail (the last --keep-steps "
                                    "steps of each rank are; --time cuts by time instead)",
                                    spec.first_step, spec.last_step, lowest ? lowest->global_rank : 0));
  } else {
    return make_error("job cut: give --time or --steps");
  }
  std::vector<TimeCut> cuts;
  for (const auto& h : job.hosts) {
    TimeCut c;
    c.absolute = true;
    c.from_ns = host_time_of(h.clock, from);
    c.to_ns = host_time_of(h.clock, to);
    cuts.push_back(c);
  }
  return cuts;
}

}  // namespace steptrace
