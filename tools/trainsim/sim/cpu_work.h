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

} // namespace trainsim
