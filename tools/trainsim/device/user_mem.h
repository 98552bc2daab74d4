// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// user_mem.h - copy_from_user / copy_to_user for the FUSE-served device.
//
// A restricted FUSE ioctl only forwards _IOC_SIZE bytes, and many Neuron
// commands encode a pointer size (8) while the real driver copies the whole
// struct. Like the real driver, the device therefore reads and writes the
// caller's memory itself, with process_vm_readv/writev on the caller's tid.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace trainsim::device {

// Returns 0 or -errno (-EFAULT when fewer than len bytes moved).
int copy_from_user(pid_t tid, void *dst, uint64_t user_addr, size_t len);
int copy_to_user(pid_t tid, uint64_t user_addr, const void *src, size_t len);

// Thread group id of a thread (from /proc/<tid>/status), or tid on failure.
pid_t tgid_of(pid_t tid);

} // namespace trainsim::device
