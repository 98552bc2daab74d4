// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// pacing.h - the time models of the simulated hardware and network, kept
// pure so the tests can check the arithmetic.
#pragma once

#include <cstdint>

namespace trainsim {

// The real driver bounces MEM_BUF_COPY through a 64 KiB kernel buffer and
// issues one DMA per chunk (neuron.md section 1b).
inline constexpr uint64_t kDmaBounceBytes = 64 * 1024;

// Time for a host<->device copy: one fixed cost per 64 KiB bounce chunk plus
// bytes at the link bandwidth. gbytes_per_s is decimal GB/s (1e9 B/s).
uint64_t copy_time_ns(uint64_t bytes, double gbytes_per_s, uint64_t per_chunk_ns);

// Bytes each rank sends in a ring all-reduce of `bytes`: 2 (N-1)/N * bytes.
uint64_t ring_allreduce_bytes_sent(uint64_t bytes, int ranks);

// Time to push `bytes` at `bytes_per_s`; 0 rate means unlimited (0 ns).
uint64_t transfer_time_ns(uint64_t bytes, double bytes_per_s);

// Time of a device-side ring all-reduce over NeuronLink at gbytes_per_s.
uint64_t device_allreduce_ns(uint64_t bytes, int ranks, double gbytes_per_s);

// Converts a --net-rate in megabits/s to the bytes/s SO_MAX_PACING_RATE takes.
// Returns 0 (no pacing) for 0; saturates at the socket option's 32-bit range
// only for rates the option cannot express.
uint64_t mbit_to_pacing_bytes(double mbit_per_s);

} // namespace trainsim
