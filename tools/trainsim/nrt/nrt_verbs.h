// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// nrt_verbs.h - the fake runtime's EFA control path, as libnrt + libfabric do
// it at model load (nrt_load_collectives): open the adapter's uverbs file,
// get a context, allocate a protection domain, create completion and queue
// pairs, register the collective buffer; undo it at close. Every call is a
// real ioctl(RDMA_VERBS_IOCTL) or legacy write(2) with the kernel's layouts
// (bpf/rdma_uapi.h) on $TRAINSIM_UVERBS_DEVICE, and is logged with its own
// timestamps for the ground truth. Internal to libnrt.so.1.
#pragma once

#include <cstdint>

#include "nrt.h"

namespace trainsim::nrt_verbs {

// Opens $TRAINSIM_UVERBS_DEVICE and sets up (no-op without it). `mr_bytes`:
// the collective buffer registered once.
void setup(uint64_t mr_bytes);
// Registers and deregisters a buffer (a registration cache miss).
int register_once(uint64_t bytes);
void teardown();
// The log of every call so far (sim only).
int calls(trainsim_verb_call *out, int max);

} // namespace trainsim::nrt_verbs
