// SPDX-License-Identifier: Apache-2.0
// This process's own CPU time (getrusage): what the tracer costs in
// userspace, for the report footer, the live view and the daemon's budget.
#pragma once

#include <sys/resource.h>

namespace steptrace {

struct CpuTimes {
  double user = 0, sys = 0;
  double total() const { return user + sys; }
};

inline CpuTimes self_cpu_times() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6,
          static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6};
}

}  // namespace steptrace
