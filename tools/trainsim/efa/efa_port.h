// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// efa_port.h - a fake EFA adapter's hardware counters as sysfs files:
// <sysfs-root>/class/infiniband/efa_<N>/ports/1/hw_counters/<name> (one
// decimal u64 per file, names per device-counters.md 2.2) and
// ports/1/rate. The sim's runtime owns efa_<N> for its device neuron<N>
// (one adapter per chip, like trn2) and advances the byte counters with the
// collective traffic it drives.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace trainsim::efa {

// Host-message counters are written to their files by a flusher thread:
// real adapters count in hardware, so the training thread that moves the
// bytes must not pay for the bookkeeping (the ground truth would otherwise
// charge file writes to the collective). RDMA counters are written by the
// caller, the runtime's proxy thread.
class Port {
public:
	Port() = default;
	~Port();
	Port(const Port &) = delete;
	Port &operator=(const Port &) = delete;
	// Creates the tree (all counters 0). rate_gbit: the port rate file.
	bool open(const std::string &sysfs_root, int index, double rate_gbit);
	bool enabled() const { return !dir_.empty(); }
	// Host-driven send/receive traffic (the network layer's messages).
	void add_messages(uint64_t tx_bytes, uint64_t rx_bytes);
	// Device collective traffic (RDMA writes from device memory).
	void add_rdma_write(uint64_t tx_bytes, uint64_t rx_bytes);
	const std::string &dir() const { return dir_; }

private:
	struct Values {
		uint64_t tx_bytes, tx_pkts, rx_bytes, rx_pkts, send_bytes, send_wrs, recv_bytes, recv_wrs,
			rdma_write_bytes, rdma_write_wrs, rdma_write_recv_bytes;
	};
	Values snapshot() const; // mu_ held
	static void write_all(const std::string &dir, const Values &v);
	void changed();          // mu_ held: wake the flusher
	void add_wire(uint64_t tx, uint64_t rx); // mu_ held: bytes and packets each way
	void flusher_loop();
	std::mutex mu_;
	std::condition_variable cv_;
	std::thread flusher_;
	bool dirty_ = false, stop_ = false;
	std::string dir_;
	uint64_t tx_bytes_ = 0, tx_pkts_ = 0, rx_bytes_ = 0, rx_pkts_ = 0;
	uint64_t send_bytes_ = 0, send_wrs_ = 0, recv_bytes_ = 0, recv_wrs_ = 0;
	uint64_t rdma_write_bytes_ = 0, rdma_write_wrs_ = 0, rdma_write_recv_bytes_ = 0;
};

// Formats the port rate like the RDMA core does ("100 Gb/sec (4X EDR)").
std::string rate_text(double gbit);

} // namespace trainsim::efa
