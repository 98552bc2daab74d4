// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// cpu_work.h - real CPU work for a fixed amount of the calling thread's CPU
// time (not wall time), so contention stretches it the way it stretches a
// real preprocessing or Python phase.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trainsim {

// Runs a checksum/float kernel over `data` (or a private buffer when null)
// until the thread has used `cpu_ns` of CPU. Returns the checksum so the
// work cannot be optimised away.
uint64_t burn_cpu(int64_t cpu_ns, const void *data = nullptr, size_t len = 0);

// The work of a phase split over named functions (never inlined, frame
// pointers kept), so a stack profiler has known code to find: the main
// thread's host work is 60 % ts_host_optimizer_step and 40 %
// ts_host_bookkeeping; a loader's preprocessing 70 % ts_preprocess_decode
// and 30 % ts_preprocess_augment. Each call adds the thread CPU time it
// really took to `spent` (by function name), the truth of that split.
struct NamedCpu {
	int64_t ns[4] = {0, 0, 0, 0}; // by kNamedCpuFunctions
};
inline constexpr const char *kNamedCpuFunctions[4] = {"ts_host_optimizer_step", "ts_host_bookkeeping",
						       "ts_preprocess_decode", "ts_preprocess_augment"};
uint64_t host_work(int64_t cpu_ns, const void *data, size_t len, NamedCpu *spent);
uint64_t preprocess_work(int64_t cpu_ns, const void *data, size_t len, NamedCpu *spent);

} // namespace trainsim
