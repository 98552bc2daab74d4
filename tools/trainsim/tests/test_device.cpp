// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The device engine driven directly (no FUSE): the device reads and writes
// "user" memory of this very process, which process_vm_* allows.
#include <catch2/catch.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "device/engine.h"
#include "sim/clock.h"
#include "sim/pacing.h"
#include "sim_protocol.h"

using namespace trainsim;
using namespace trainsim::device;

namespace {
pid_t self_tid()
{
	return static_cast<pid_t>(syscall(SYS_gettid));
}

uint64_t alloc(Device &d, uint64_t size, bool host = false)
{
	uint64_t handle = 0;
	neuron_arg_mem_alloc_v2mt64 a{};
	a.size = size;
	a.host_memory = host;
	a.mem_handle_ptr = reinterpret_cast<uint64_t>(&handle);
	// MEM_ALLOC_V2MT64 is _IOR: FUSE passes no input, the device reads it.
	REQUIRE(d.ioctl(self_tid(), NEURON_CMD_MEM_ALLOC_V2MT64, reinterpret_cast<uint64_t>(&a), nullptr, 0) == 0);
	REQUIRE(handle != 0);
	return handle;
}

int buf_copy(Device &d, uint64_t h, void *buf, uint64_t off, uint64_t size, bool to_dev)
{
	neuron_arg_mem_buf_copy64 a{h, reinterpret_cast<uint64_t>(buf), size, off, to_dev ? 1u : 0u, 0};
	// RW with a 40-byte encoded size: FUSE passes the struct in `in`.
	return d.ioctl(self_tid(), NEURON_CMD_MEM_BUF_COPY64, reinterpret_cast<uint64_t>(&a), &a, sizeof(a));
}
} // namespace

TEST_CASE("device: MEM_BUF_COPY64 moves real bytes and takes the modelled time", "[unit][device]")
{
	DeviceConfig cfg;
	cfg.pcie_gbps = 1.0;
	Fabric f(1);
	Device d(0, cfg, f);
	uint64_t h = alloc(d, 8 << 20);
	std::vector<char> out(4 << 20), back(4 << 20);
	for (size_t i = 0; i < out.size(); i++)
		out[i] = static_cast<char>(i * 7);
	int64_t t0 = now_ns();
	REQUIRE(buf_copy(d, h, out.data(), 1 << 20, out.size(), true) == 0);
	int64_t dt = now_ns() - t0;
	CHECK(dt >= static_cast<int64_t>(copy_time_ns(out.size(), 1.0, cfg.dma_chunk_ns)));
	REQUIRE(buf_copy(d, h, back.data(), 1 << 20, back.size(), false) == 0);
	CHECK(memcmp(out.data(), back.data(), out.size()) == 0);
	CHECK(d.counters().copies == 2);
	CHECK(d.counters().copy_bytes == 8u << 20);
	// Out of bounds, bad handle, bad user pointer.
	CHECK(buf_copy(d, h, out.data(), 6 << 20, 4 << 20, true) == -EINVAL);
	CHECK(buf_copy(d, 999, out.data(), 0, 16, true) == -EINVAL);
	CHECK(buf_copy(d, h, reinterpret_cast<void *>(16), 0, 16, true) == -EFAULT);
	neuron_arg_mem_free fr{h};
	CHECK(d.ioctl(self_tid(), NEURON_CMD_MEM_FREE, reinterpret_cast<uint64_t>(&fr), nullptr, 0) == 0);
	CHECK(d.ioctl(self_tid(), NEURON_CMD_MEM_FREE, reinterpret_cast<uint64_t>(&fr), nullptr, 0) == -EINVAL);
}

TEST_CASE("device: unknown commands are ENOTTY, lock commands succeed", "[unit][device]")
{
	Fabric f(1);
	Device d(0, DeviceConfig{}, f);
	uint64_t word = 0;
	CHECK(d.ioctl(self_tid(), 0xc0184e99, reinterpret_cast<uint64_t>(&word), nullptr, 0) == -ENOTTY);
	CHECK(d.ioctl(self_tid(), NEURON_CMD_CRWL_READER_ENTER, reinterpret_cast<uint64_t>(&word), &word, 8) == 0);
	CHECK(d.counters().unknown == 1);
	neuron_arg_semaphore s{0, 3, 5};
	REQUIRE(d.ioctl(self_tid(), NEURON_CMD_SEMAPHORE_WRITE, reinterpret_cast<uint64_t>(&s), nullptr, 0) == 0);
	REQUIRE(d.ioctl(self_tid(), NEURON_CMD_SEMAPHORE_INCREMENT, reinterpret_cast<uint64_t>(&s), nullptr, 0) == 0);
	neuron_arg_semaphore rd{0, 3, 0};
	REQUIRE(d.ioctl(self_tid(), NEURON_CMD_SEMAPHORE_READ, reinterpret_cast<uint64_t>(&rd), &rd, 8) == 0);
	CHECK(rd.value == 10);
	neuron_arg_semaphore bad{0, 256, 0};
	CHECK(d.ioctl(self_tid(), NEURON_CMD_SEMAPHORE_WRITE, reinterpret_cast<uint64_t>(&bad), nullptr, 0) == -EINVAL);
}

namespace {
// Loads a program, registers an NQ and runs one execution on `d`; returns
// the NQ entry the device posted.
struct MiniRuntime {
	Device &d;
	alignas(64) trainsim_nq_entry nq[TRAINSIM_NQ_ENTRIES]{};
	uint64_t ring = 0;
	explicit MiniRuntime(Device &dev, uint64_t compute_ns, uint64_t cc_bytes, uint32_t ranks) : d(dev)
	{
		std::vector<char> code(4096);
		trainsim_neff n{TRAINSIM_NEFF_MAGIC, compute_ns, cc_bytes, ranks, 2};
		memcpy(code.data(), &n, sizeof(n));
		neuron_arg_program_engine_nc64 p{0, 0, 0, reinterpret_cast<uint64_t>(code.data()), code.size(), 0};
		REQUIRE(d.ioctl(self_tid(), NEURON_CMD_PROGRAM_ENGINE_NC64, reinterpret_cast<uint64_t>(&p), &p, sizeof(p)) ==
			0);
		ring = alloc(d, 4096);
		trainsim_nq_init_v2 q{};
		q.size = sizeof(nq);
		q.mmap_offset = reinterpret_cast<uint64_t>(nq);
		REQUIRE(d.ioctl(self_tid(), TRAINSIM_CMD_NOTIFICATIONS_INIT_V2, reinterpret_cast<uint64_t>(&q), nullptr, 0) ==
			0);
		CHECK(q.mem_handle != 0);
	}
	// compute_ns >= 0: a COMPUTE descriptor before the EXEC one.
	trainsim_nq_entry run(uint64_t seq, int64_t compute_ns = -1)
	{
		trainsim_desc descs[2] = {{TRAINSIM_DESC_OP_COMPUTE, 0, static_cast<uint64_t>(compute_ns)},
					  {TRAINSIM_DESC_OP_EXEC, 0, seq}};
		uint32_t n = compute_ns >= 0 ? 2 : 1;
		neuron_arg_dma_copy_descriptors64 cd{ring, reinterpret_cast<uint64_t>(compute_ns >= 0 ? descs : descs + 1), n,
						     0, 0, 0, 0};
		REQUIRE(d.ioctl(self_tid(), NEURON_CMD_DMA_COPY_DESCRIPTORS64, reinterpret_cast<uint64_t>(&cd), nullptr, 0) ==
			0);
		neuron_arg_dma_queue_copy_start k1{1, 0, 1, 1}, k0{0, 0, 1, 1};
		REQUIRE(d.ioctl(self_tid(), NEURON_CMD_DMA_QUEUE_COPY_START, reinterpret_cast<uint64_t>(&k1), nullptr, 0) == 0);
		REQUIRE(d.ioctl(self_tid(), NEURON_CMD_DMA_QUEUE_COPY_START, reinterpret_cast<uint64_t>(&k0), nullptr, 0) == 0);
		volatile trainsim_nq_entry *e = &nq[seq % TRAINSIM_NQ_ENTRIES];
		int64_t deadline = now_ns() + 5000000000;
		while (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != seq && now_ns() < deadline)
			std::this_thread::yield();
		REQUIRE(e->seq == seq);
		trainsim_nq_entry copy;
		memcpy(&copy, const_cast<trainsim_nq_entry *>(e), sizeof(copy));
		return copy;
	}
};
} // namespace

TEST_CASE("device: a kick runs the program for its compute time and posts to the NQ", "[unit][device]")
{
	Fabric f(1);
	Device d(0, DeviceConfig{}, f);
	MiniRuntime rt(d, 15000000, 0, 1);
	int64_t t0 = now_ns();
	trainsim_nq_entry e = rt.run(1);
	CHECK(e.status == 0);
	CHECK(e.planned_compute_ns == 15000000);
	CHECK(e.t_compute_end_ns - e.t_start_ns >= 15000000);
	CHECK(static_cast<int64_t>(e.t_start_ns) >= t0);
	CHECK(e.t_done_ns == e.t_compute_end_ns);
	CHECK(d.counters().kicks == 2);
	CHECK(d.counters().executions == 1);
}

TEST_CASE("device: collectives wait for every device, then take bytes/link time", "[unit][device]")
{
	DeviceConfig cfg;
	cfg.devices = 2;
	cfg.link_gbps = 1.0;
	Fabric f(2);
	Device d0(0, cfg, f), d1(1, cfg, f);
	trainsim_nq_entry e0{}, e1{};
	// Device 1 computes 40 ms longer: device 0 must wait for it.
	std::thread late([&] {
		MiniRuntime rt(d1, 45000000, 2000000, 2);
		e1 = rt.run(1);
	});
	MiniRuntime rt0(d0, 5000000, 2000000, 2);
	e0 = rt0.run(1);
	late.join();
	CHECK(e0.status == 0);
	CHECK(e1.status == 0);
	CHECK(e0.planned_cc_xfer_ns == device_allreduce_ns(2000000, 2, 1.0));
	CHECK(e0.t_cc_ready_ns - e0.t_compute_end_ns > 30000000); // waited for the partner
	CHECK(e1.t_cc_ready_ns - e1.t_compute_end_ns < 5000000);  // the partner did not
	CHECK(e0.t_done_ns - e0.t_cc_ready_ns >= e0.planned_cc_xfer_ns);
}

TEST_CASE("device: a collective whose partner never comes fails instead of hanging", "[unit][device]")
{
	DeviceConfig cfg;
	cfg.devices = 2;
	cfg.collective_timeout_ms = 100;
	Fabric f(2);
	Device d0(0, cfg, f);
	MiniRuntime rt(d0, 1000000, 4096, 2);
	trainsim_nq_entry e = rt.run(1);
	CHECK(e.status == 1200); // NRT_EXEC_HW_ERR_COLLECTIVES
}

TEST_CASE("device: a COMPUTE descriptor sets that one execution's compute time", "[unit][device][change]")
{
	Fabric f(1);
	Device d(0, DeviceConfig{}, f);
	MiniRuntime rt(d, 30000000, 0, 1);
	trainsim_nq_entry fast = rt.run(1, 5000000);
	CHECK(fast.status == 0);
	CHECK(fast.planned_compute_ns == 5000000);
	CHECK(fast.t_compute_end_ns - fast.t_start_ns >= 5000000);
	CHECK(fast.t_compute_end_ns - fast.t_start_ns < 25000000);
	// Without one, the program's time again.
	trainsim_nq_entry plain = rt.run(2);
	CHECK(plain.planned_compute_ns == 30000000);
	CHECK(plain.t_compute_end_ns - plain.t_start_ns >= 30000000);
}

TEST_CASE("device: stopping the fabric wakes an engine waiting for a hung partner", "[unit][device][hang]")
{
	DeviceConfig cfg;
	cfg.devices = 2;
	cfg.collective_timeout_ms = 60000;
	Fabric f(2);
	Device d0(0, cfg, f);
	MiniRuntime rt(d0, 1000000, 4096, 2);
	std::thread stopper([&] {
		usleep(200000);
		f.shutdown();
	});
	int64_t t0 = now_ns();
	trainsim_nq_entry e = rt.run(1);
	stopper.join();
	CHECK(e.status == 1200); // failed at once, not after 60 s
	CHECK(now_ns() - t0 < 3000000000);
}
