// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/cpu_work.h"

#include <cstring>

#include "sim/clock.h"

namespace trainsim {

uint64_t burn_cpu(int64_t cpu_ns, const void *data, size_t len)
{
	static thread_local unsigned char scratch[16384];
	if (!data || len == 0) {
		data = scratch;
		len = sizeof(scratch);
	}
	const auto *p = static_cast<const unsigned char *>(data);
	uint64_t h = 1469598103934665603ull;
	double acc = 1.0;
	int64_t end = thread_cpu_ns() + cpu_ns;
	size_t pos = 0;
	// Check the clock every ~16 KiB: cheap (vDSO) and fine-grained (~10 us).
	while (cpu_ns > 0 && thread_cpu_ns() < end) {
		size_t n = len - pos < 16384 ? len - pos : 16384;
		for (size_t i = 0; i < n; i++) {
			h = (h ^ p[pos + i]) * 1099511628211ull; // FNV-1a, like a decode/augment pass
			acc = acc * 1.0000001 + static_cast<double>(p[pos + i] & 7);
		}
		pos = (pos + n) % len;
	}
	uint64_t bits;
	memcpy(&bits, &acc, sizeof(bits));
	return h ^ bits;
}

// The named functions: extern "C" so their symbols are the names above.
extern "C" {
__attribute__((noinline)) uint64_t ts_host_optimizer_step(int64_t cpu_ns, const void *data, size_t len)
{
	return burn_cpu(cpu_ns, data, len);
}
__attribute__((noinline)) uint64_t ts_host_bookkeeping(int64_t cpu_ns, const void *data, size_t len)
{
	return burn_cpu(cpu_ns, data, len);
}
__attribute__((noinline)) uint64_t ts_preprocess_decode(int64_t cpu_ns, const void *data, size_t len)
{
	return burn_cpu(cpu_ns, data, len);
}
__attribute__((noinline)) uint64_t ts_preprocess_augment(int64_t cpu_ns, const void *data, size_t len)
{
	return burn_cpu(cpu_ns, data, len);
}
}

namespace {
using WorkFn = uint64_t (*)(int64_t, const void *, size_t);
uint64_t timed(WorkFn fn, int64_t cpu_ns, const void *data, size_t len, int64_t *spent)
{
	const int64_t t0 = thread_cpu_ns();
	const uint64_t h = fn(cpu_ns, data, len);
	*spent += thread_cpu_ns() - t0;
	return h;
}
} // namespace

uint64_t host_work(int64_t cpu_ns, const void *data, size_t len, NamedCpu *spent)
{
	const int64_t a = cpu_ns * 6 / 10;
	return timed(ts_host_optimizer_step, a, data, len, &spent->ns[0]) ^
	       timed(ts_host_bookkeeping, cpu_ns - a, data, len, &spent->ns[1]);
}

uint64_t preprocess_work(int64_t cpu_ns, const void *data, size_t len, NamedCpu *spent)
{
	const int64_t a = cpu_ns * 7 / 10;
	return timed(ts_preprocess_decode, a, data, len, &spent->ns[2]) ^
	       timed(ts_preprocess_augment, cpu_ns - a, data, len, &spent->ns[3]);
}

} // namespace trainsim
