// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// nds_layout.h - the Neuron datastore slab layout (driver >= 2.19.64), as the
// sim's runtime writes it and its device serves it. Offsets and indexes from
// ../shared/domain/device-counters.md sections 1.3-1.5 (DRV
// share/neuron_driver_shared.h). steptrace has its own copy of the reader
// side (user/signals/nds.h) so each checks the other.
#pragma once

#include <cstdint>
#include <cstring>

namespace trainsim::nds {

constexpr uint64_t kSlabBytes = 256 * 1024; // NEURON_DATASTORE_SIZE
constexpr int kSlots = 16;                  // NEURON_MAX_PROCESS_PER_DEVICE
constexpr uint32_t kHeaderVersion = 100000; // the value the runtime writes (RE)

// NC counter indexes (enum order in the shared header).
enum NcCounter : int {
	TIME_IN_USE = 0,      // cumulative, microseconds
	INFER_COMPLETED = 1,  // cumulative
	INFER_COMPLETED_WITH_ERR = 2,
	INFER_COMPLETED_WITH_NUM_ERR = 3,
	INFER_TIMED_OUT = 4,
	INFER_INCORRECT_INPUT = 5,
	INFER_FAILED_TO_QUEUE = 6,
	ERR_GENERIC = 7,
	ERR_HW = 11,
	LATENCY_DEVICE = 13, // last value
	LATENCY_TOTAL = 14,  // last value
	NC_TIME = 15,        // last value
	GENERIC_FAIL = 16,
	CC_TIME = 21, // last value
	INFERENCE_COUNT = 28,
	MAC_COUNT = 29,
	HW_ERR_COLLECTIVES = 31,
};

// Byte offset of NC counter k of physical NeuronCore n inside a slab.
inline uint64_t nc_counter_offset(int n, int k)
{
	if (n <= 3 && k <= 30)
		return 256 + static_cast<uint64_t>(31 * n + k) * 8;
	if (n <= 3)
		return 55936 + static_cast<uint64_t>(64 * n + (k - 31)) * 8;
	return 57984 + static_cast<uint64_t>(96 * (n - 4) + k) * 8;
}

// ND (device) counter i.
inline uint64_t nd_counter_offset(int i) { return 8 + static_cast<uint64_t>(i) * 8; }

// The runtime writes the latency group as IEEE-754 doubles in seconds (the
// "latency quad" of the third-party analysis; the real encoding is marked
// verify in device-counters.md). Stored as the double's bit pattern.
inline uint64_t seconds_bits(double s)
{
	uint64_t v;
	memcpy(&v, &s, sizeof(v));
	return v;
}

} // namespace trainsim::nds
