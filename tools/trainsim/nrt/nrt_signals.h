// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// nrt_signals.h - what the fake runtime publishes besides its ioctls: its
// Neuron datastore counters (written per execution, no syscall), the fake
// EFA adapter's counters, and the per-NC network proxy thread that does the
// device collective's network work. Internal to libnrt.so.1.
#pragma once

#include <cstdint>
#include <string>

#include "nrt.h"

namespace trainsim::nrt_signals {

// After ACQUIRE_NEURON_DS(pid 0) on the device at `dev_path`: map the slab
// read-write and write the header and versions. False: no datastore.
bool nds_attach(const std::string &dev_path, uint64_t mmap_offset, uint32_t size);
void nds_detach();
// One completed execution on `nc` (device timestamps from the NQ entry).
void nds_record(int nc, const trainsim_exec_info &e);

// Opens efa_<device index> under $TRAINSIM_SYSFS_ROOT (rate $TRAINSIM_EFA_GBIT).
void efa_open(const std::string &dev_path);
void efa_messages(uint64_t tx, uint64_t rx);

// Starts the proxy thread for `nc` and registers its mailbox with the device
// (NOTIFICATIONS_INIT_V2 on a TOPSP queue) through `register_fn`.
bool proxy_start(int nc, int ranks, bool (*register_fn)(uint64_t addr, uint32_t size, int nc));
// The execution was submitted: the proxy watches for the device's request.
void proxy_arm();
// nrt_execute returned: stop watching.
void proxy_disarm();
void proxy_stop();

} // namespace trainsim::nrt_signals
