// SPDX-License-Identifier: Apache-2.0
// CLOCK_MONOTONIC in nanoseconds: the clock BPF's bpf_ktime_get_ns() uses,
// so live-side deadlines and record timestamps compare directly.
#pragma once

#include <time.h>

#include <cstdint>

namespace steptrace {

inline uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace steptrace
