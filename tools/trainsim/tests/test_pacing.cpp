// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "sim/clock.h"
#include "sim/collective.h"
#include "sim/cpu_work.h"
#include "sim/pacing.h"

using namespace trainsim;

TEST_CASE("copy time: per-chunk cost plus bytes at the link rate", "[unit][pacing]")
{
	// 1 MiB = 16 bounce chunks; 1 GB/s -> 1048576 ns.
	CHECK(copy_time_ns(1 << 20, 1.0, 1000) == 16 * 1000 + 1048576);
	CHECK(copy_time_ns(1, 1.0, 1000) == 1000 + 1);
	CHECK(copy_time_ns(0, 8.0, 500) == 500);
	CHECK(copy_time_ns(64 * 1024 + 1, 1000.0, 100) == 2 * 100 + 66);
}

TEST_CASE("ring all-reduce volume and device collective time", "[unit][pacing]")
{
	CHECK(ring_allreduce_bytes_sent(1000, 1) == 0);
	CHECK(ring_allreduce_bytes_sent(1000, 2) == 1000);
	CHECK(ring_allreduce_bytes_sent(1000, 4) == 1500);
	CHECK(device_allreduce_ns(4000, 2, 1.0) == 4000);
	CHECK(transfer_time_ns(1000, 0) == 0);
	CHECK(transfer_time_ns(500, 1000) == 500000000);
}

TEST_CASE("Mbit/s to SO_MAX_PACING_RATE bytes/s", "[unit][pacing]")
{
	CHECK(mbit_to_pacing_bytes(0) == 0);
	CHECK(mbit_to_pacing_bytes(8) == 1000000);
	CHECK(mbit_to_pacing_bytes(3200) == 400000000);
	CHECK(mbit_to_pacing_bytes(1e9) == 4294967294ull); // below "unlimited"
}

TEST_CASE("schedstat parsing takes the run_delay field", "[unit][clock]")
{
	CHECK(parse_schedstat_delay("311394207 308114334 83\n") == 308114334);
	CHECK(parse_schedstat_delay("garbage") == 0);
	RunDelay rd;
	CHECK(rd.ok());
	CHECK(rd.read() >= 0);
}

TEST_CASE("burn_cpu spends thread CPU time, not wall time", "[unit][clock]")
{
	int64_t c0 = thread_cpu_ns();
	burn_cpu(20 * 1000 * 1000);
	int64_t used = thread_cpu_ns() - c0;
	CHECK(used >= 20 * 1000 * 1000);
	CHECK(used < 60 * 1000 * 1000);
}

namespace {
// Runs a ring all-reduce of `floats` floats over `world` threads on
// loopback; returns the wall time in ns and checks every element.
int64_t ring_allreduce(int world, size_t floats, uint64_t pacing)
{
	std::vector<int> fds(world);
	std::vector<uint16_t> ports(world);
	std::string err;
	for (int r = 0; r < world; r++) {
		fds[r] = make_listener(htonl(INADDR_LOOPBACK), &ports[r], &err);
		REQUIRE(fds[r] >= 0);
	}
	std::vector<std::vector<float>> data(world, std::vector<float>(floats));
	std::vector<std::string> errs(world);
	std::vector<int> ok(world, 0);
	int64_t t0 = now_ns();
	std::vector<std::thread> th;
	for (int r = 0; r < world; r++)
		th.emplace_back([&, r] {
			HostCollective c;
			for (size_t i = 0; i < floats; i++)
				data[r][i] = static_cast<float>(r + 1) + static_cast<float>(i % 3);
			ok[r] = c.connect(r, world, fds[r], htonl(INADDR_LOOPBACK), ports[(r + 1) % world], pacing, &errs[r]) &&
				c.allreduce(data[r].data(), floats, &errs[r]);
		});
	for (auto &t : th)
		t.join();
	int64_t dt = now_ns() - t0;
	for (int r = 0; r < world; r++) {
		INFO(errs[r]);
		REQUIRE(ok[r]);
		close(fds[r]);
		float base = static_cast<float>(world * (world + 1) / 2);
		for (size_t i = 0; i < floats; i += 997)
			REQUIRE(data[r][i] == base + static_cast<float>(world * (i % 3)));
		REQUIRE(data[r][floats - 1] == base + static_cast<float>(world * ((floats - 1) % 3)));
	}
	return dt;
}
} // namespace

TEST_CASE("host ring all-reduce sums correctly for 2..4 ranks", "[unit][collective]")
{
	for (int world : {2, 3, 4})
		ring_allreduce(world, 100003, 0);
}

TEST_CASE("SO_MAX_PACING_RATE really limits the all-reduce", "[unit][collective]")
{
	// 2 ranks x 4 MiB: each sends 4 MiB at 100 Mbit/s (12.5 MB/s) -> ~336 ms,
	// far from the unpaced time even under sanitizers on a loaded machine
	// (seen: 106 ms unpaced in the ASan pass).
	uint64_t rate = mbit_to_pacing_bytes(100);
	size_t floats = (4u << 20) / sizeof(float);
	int64_t expect = static_cast<int64_t>(transfer_time_ns(ring_allreduce_bytes_sent(4u << 20, 2), rate));
	int64_t dt = ring_allreduce(2, floats, rate);
	CHECK(dt > expect * 8 / 10);
	CHECK(dt < expect * 3);
	int64_t fast = ring_allreduce(2, floats, 0);
	CHECK(fast < dt / 2);
}
