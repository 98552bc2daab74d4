// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// nds.h - the fake driver's side of the Neuron datastore (16 slabs per
// device, ACQUIRE/RELEASE_NEURON_DS semantics) and the driver's sysfs
// metrics tree (neuronN/neuron_coreM/stats/...), written as plain files
// under a configurable sysfs root.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace trainsim::device {

// The 16 slabs of one device live in one shared file (see sim_protocol.h:
// FUSE cannot map daemon memory into the caller).
class DatastoreWindow {
public:
	// Creates `path` (16 x 256 KiB, zeroed). Empty path: NDS disabled
	// (ACQUIRE fails with ENOTTY, like a driver without NDS).
	bool open(const std::string &path, std::string *err);
	~DatastoreWindow();
	bool enabled() const { return fd_ >= 0; }
	const std::string &path() const { return path_; }

	// ACQUIRE_NEURON_DS from process `caller` for `pid` (0 = own). Returns
	// the slab's offset in the window file, or -errno: pid != 0 only finds
	// an existing slot (-ENOENT otherwise); pid == 0 creates one (-EBUSY when
	// all 16 are taken).
	int64_t acquire(pid_t caller, pid_t pid);
	// RELEASE_NEURON_DS: only the owner's release frees (and zeroes) the slab.
	void release(pid_t caller);

private:
	std::mutex mu_;
	std::string path_;
	int fd_ = -1;
	std::array<pid_t, 16> owner_{};
};

// neuron sysfs metrics of one device: status counters per NC and memory
// usage by category (totals only). Counters are live, as in driver >= 2.30.
class SysfsMetrics {
public:
	// root: the sysfs root (the tree goes in
	// <root>/devices/virtual/neuron_device/neuron<index>). Empty: disabled.
	void init(const std::string &root, int index, int cores);
	// One finished execution on `nc` with an NRT status (0 ok, 5 timeout,
	// 1200 collectives hardware error, other = failure).
	void on_execution(int nc, int32_t status);
	// Device or host memory in use changed (bytes, signed).
	void on_memory(int nc, bool host, int64_t delta);

private:
	void write_counter(const std::string &dir, uint64_t v);
	std::mutex mu_;
	std::string base_;
	std::map<std::string, uint64_t> values_;
	int64_t dev_mem_ = 0, host_mem_ = 0;
};

} // namespace trainsim::device
