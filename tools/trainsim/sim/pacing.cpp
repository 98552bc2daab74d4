// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/pacing.h"

#include <cmath>

namespace trainsim {

uint64_t transfer_time_ns(uint64_t bytes, double bytes_per_s)
{
	if (bytes_per_s <= 0 || bytes == 0)
		return 0;
	return static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * 1e9 / bytes_per_s));
}

uint64_t copy_time_ns(uint64_t bytes, double gbytes_per_s, uint64_t per_chunk_ns)
{
	uint64_t chunks = (bytes + kDmaBounceBytes - 1) / kDmaBounceBytes;
	if (chunks == 0)
		chunks = 1; // even an empty copy costs one descriptor round trip
	return chunks * per_chunk_ns + transfer_time_ns(bytes, gbytes_per_s * 1e9);
}

uint64_t ring_allreduce_bytes_sent(uint64_t bytes, int ranks)
{
	if (ranks <= 1)
		return 0;
	return 2 * bytes * static_cast<uint64_t>(ranks - 1) / static_cast<uint64_t>(ranks);
}

uint64_t device_allreduce_ns(uint64_t bytes, int ranks, double gbytes_per_s)
{
	return transfer_time_ns(ring_allreduce_bytes_sent(bytes, ranks), gbytes_per_s * 1e9);
}

uint64_t mbit_to_pacing_bytes(double mbit_per_s)
{
	if (mbit_per_s <= 0)
		return 0;
	double b = mbit_per_s * 1e6 / 8.0;
	// SO_MAX_PACING_RATE takes an unsigned long since 5.x but ~0U still
	// means "unlimited" to older kernels, so stay below it.
	if (b >= 4294967295.0)
		b = 4294967294.0;
	return static_cast<uint64_t>(b);
}

} // namespace trainsim
