// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// engine.h - the simulated Neuron chips: ioctl semantics, DMA timing, the
// execution engine and the device-side collective. Independent of FUSE so
// it can be driven directly by tests.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/nds.h"
#include "sim_protocol.h"

namespace trainsim::device {

struct DeviceConfig {
	int devices = 1;
	double pcie_gbps = 8.0;           // host<->device copy bandwidth, GB/s
	uint64_t dma_chunk_ns = 1000;     // fixed cost per 64 KiB bounce chunk
	double link_gbps = 50.0;          // NeuronLink bandwidth for device collectives, GB/s
	uint64_t collective_timeout_ms = 30000;
	std::string nds_dir;    // datastore windows <nds_dir>/neuronN.nds; empty: no NDS (old driver)
	std::string sysfs_root; // neuron sysfs metrics under <root>/devices/virtual/neuron_device; empty: none
	int cores = 2;          // NeuronCores per device (trn1: 2)
};

// NeuronLink between the chips: every device's execution with the same
// sequence number meets here before the collective transfer starts.
class Fabric {
public:
	explicit Fabric(int participants) : participants_(participants) {}
	// Blocks until `participants` devices arrived for `seq`, or the timeout.
	// Returns false on timeout (a rank died or never got there).
	bool arrive(uint64_t seq, uint64_t timeout_ms);
	// Fails every round, now and later, and wakes the waiters: a daemon
	// that is told to stop must not wait out the timeout for a rank that
	// hangs or died.
	void shutdown();

private:
	struct Round {
		int arrived = 0;
		int left = 0;
		bool done = false;
		bool failed = false;
	};
	const int participants_;
	bool shutdown_ = false;
	std::mutex mu_;
	std::condition_variable cv_;
	std::map<uint64_t, Round> rounds_;
};

struct IoctlCounters {
	std::atomic<uint64_t> calls{0};
	std::atomic<uint64_t> copies{0};
	std::atomic<uint64_t> copy_bytes{0};
	std::atomic<uint64_t> kicks{0};
	std::atomic<uint64_t> acks{0};
	std::atomic<uint64_t> executions{0};
	std::atomic<uint64_t> unknown{0};
};

class Device {
public:
	Device(int index, const DeviceConfig &cfg, Fabric &fabric);
	~Device();
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;

	// Handles one ioctl from thread `tid`. `in` holds the bytes FUSE copied
	// in (may be fewer than the driver's struct; then the device reads the
	// caller's memory itself, like copy_from_user). Returns 0 or -errno.
	// May sleep for the modelled DMA time.
	int ioctl(pid_t tid, uint32_t cmd, uint64_t arg, const void *in, size_t in_size);

	int index() const { return index_; }
	const IoctlCounters &counters() const { return counters_; }
	// The datastore window file (empty when NDS is off).
	const std::string &nds_path() const { return nds_.path(); }
	void stop();

private:
	struct Chunk {
		std::unique_ptr<char[]> data;
		uint64_t size = 0;
		bool host = false;
	};
	struct NotifyQueue {
		pid_t tgid = 0;
		uint64_t addr = 0;
		uint32_t entries = 0;
	};
	struct ExecJob {
		pid_t tgid;
		uint32_t nc;
		uint64_t seq;
		uint64_t t_kick_ns;
		int64_t compute_ns; // from a COMPUTE descriptor; -1: the program's
	};
	struct Program {
		trainsim_neff neff{};
		bool valid = false;
	};

	// Reads the driver-sized argument: FUSE's copy when it is big enough,
	// else the caller's memory.
	int read_arg(pid_t tid, uint64_t arg, const void *in, size_t in_size, void *out, size_t size);
	void dma_wait(uint64_t start_ns, uint64_t bytes);
	int do_mem_alloc(pid_t tid, uint64_t arg);
	int do_mem_free(pid_t tid, uint64_t arg, const void *in, size_t in_size);
	int do_buf_copy(pid_t tid, uint64_t arg, const void *in, size_t in_size, bool bounce);
	int do_mem_copy(pid_t tid, uint64_t arg);
	int do_program(pid_t tid, uint64_t arg, const void *in, size_t in_size);
	int do_copy_descriptors(pid_t tid, uint64_t arg);
	int do_kick(pid_t tid, uint64_t arg);
	int do_ack(pid_t tid, uint64_t arg);
	int do_semaphore(pid_t tid, uint32_t cmd, uint64_t arg, const void *in, size_t in_size);
	int do_nq_init(pid_t tid, uint64_t arg);
	int do_acquire_ds(pid_t tid, uint64_t arg);
	int do_release_ds(pid_t tid, uint64_t arg);
	// The collective's network part through the runtime's proxy thread;
	// returns false on timeout.
	bool proxy_transfer(pid_t tgid, uint64_t mailbox, uint64_t seq, uint64_t bytes, uint64_t xfer_ns);
	void exec_loop();
	void post(const NotifyQueue &nq, const ExecJob &job, trainsim_nq_entry entry);

	const int index_;
	const DeviceConfig cfg_;
	Fabric &fabric_;
	IoctlCounters counters_;

	std::mutex mu_; // guards everything below
	uint64_t next_handle_ = 0x1000;
	std::map<uint64_t, Chunk> chunks_;
	std::map<std::pair<pid_t, uint32_t>, Program> programs_;   // (tgid, nc)
	std::map<pid_t, NotifyQueue> nqs_;                        // by tgid
	std::map<pid_t, uint64_t> proxies_;                       // tgid -> proxy mailbox VA
	DatastoreWindow nds_;
	SysfsMetrics sysfs_;
	std::map<pid_t, std::vector<ExecJob>> pending_;           // described, not kicked
	std::array<uint32_t, 256> semaphores_{};
	std::deque<ExecJob> queue_;
	std::condition_variable cv_;
	bool stopping_ = false;
	std::thread exec_thread_;
};

uint64_t monotonic_ns();
// Sleeps until CLOCK_MONOTONIC reaches t_ns (restarts on EINTR).
void sleep_until(uint64_t t_ns);

} // namespace trainsim::device
