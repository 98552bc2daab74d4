// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// verbs.h - the fake EFA adapter's control path: the uverbs file
// (<dev-dir>/uverbs0) that the fake runtime opens like /dev/infiniband/uverbs0.
// It answers RDMA_VERBS_IOCTL and legacy write(2) commands with the real
// command layouts (bpf/rdma_uapi.h) and takes the time the real adapter's
// admin queue takes: the caller sleeps in the syscall while the "device"
// works (memory registration pins pages: a fixed cost plus one per MiB).
// Handles are counters; nothing is really registered.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace trainsim::device {

struct VerbsCost {
	uint64_t admin_ns = 300000;        // one admin command (create/destroy/alloc)
	uint64_t reg_fixed_ns = 200000;    // memory registration, fixed part
	uint64_t reg_per_mib_ns = 40000;   // ... and per MiB pinned
};

class VerbsAdapter {
public:
	explicit VerbsAdapter(VerbsCost cost = {}) : cost_(cost) {}
	// ioctl(RDMA_VERBS_IOCTL): `hdr` is the 24-byte header FUSE copied in;
	// attributes are read from the caller's memory. 0 or -errno.
	int ioctl(pid_t tid, unsigned cmd, uint64_t arg, const void *hdr, size_t hdr_len);
	// write(2) of a legacy command. Bytes consumed or -errno.
	long write(pid_t tid, const void *buf, size_t len);

	uint64_t calls() const { return calls_.load(); }
	uint64_t registered_bytes() const { return registered_.load(); }

private:
	// Time one command takes; `bytes` the region of a registration.
	uint64_t cost_ns(bool registration, uint64_t bytes) const;
	VerbsCost cost_;
	std::atomic<uint64_t> calls_{0}, registered_{0};
};

} // namespace trainsim::device
