// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// sim_protocol.h - the parts of the fake Neuron device protocol that the real
// driver leaves to the runtime and the hardware (program format, descriptor
// contents, notification-queue entries). Shared by libnrt.so.1 and
// trainsim-device. Everything the kernel can see (ioctl numbers and argument
// layouts) comes from bpf/neuron_uapi.h instead; nothing here changes those.
#ifndef TRAINSIM_SIM_PROTOCOL_H
#define TRAINSIM_SIM_PROTOCOL_H

#include <stdint.h>

#include "neuron_uapi.h"

// NOTIFICATIONS_INIT_V2 is not in neuron_uapi.h (the tracer does not decode
// it). Value from neuron.md section 1d: _IOR('N', 53, pointer) = 0x80084e35.
#ifndef TRAINSIM_CMD_NOTIFICATIONS_INIT_V2
#define TRAINSIM_CMD_NOTIFICATIONS_INIT_V2 0x80084e35u
#endif

// Program bytes that nrt_load hands to PROGRAM_ENGINE_NC64 (the sim's
// "NEFF"). The device parses the header; the rest of the buffer is padding
// standing in for instruction streams so the copy has a realistic size.
#define TRAINSIM_NEFF_MAGIC 0x4646454e4d495354ull // "TSIMNEFF"
struct trainsim_neff {
	uint64_t magic;
	uint64_t compute_ns;      // device compute per execution
	uint64_t cc_bytes;        // device-side all-reduce payload per execution (0: none)
	uint32_t cc_ranks;        // participants in the device collective
	uint32_t input_queues;    // DMA queues kicked per execution (>= 1)
};

// One 16-byte DMA descriptor as written by DMA_COPY_DESCRIPTORS64
// (NEURON_DMA_DESC_BYTES). Real descriptors describe transfers; the sim's
// execution ring carries one "execute" descriptor per nrt_execute.
#define TRAINSIM_DESC_OP_EXEC 0x45584543u // "EXEC"
struct trainsim_desc {
	uint32_t op;
	uint32_t nc_id;
	uint64_t seq; // per-process execution sequence number, starts at 1
};
// Optional, right before an EXEC descriptor in the same copy: that
// execution's device compute time in ns (in `seq`), instead of the program's
// compute_ns. The runtime sends one with every execution once the compute
// time is set per execution (trainsim --change compute-ms=...), so the
// descriptor copies have the same size before and after the change.
#define TRAINSIM_DESC_OP_COMPUTE 0x434d5054u // "CMPT"

// The real driver returns an mmap offset from NOTIFICATIONS_INIT_V2 and the
// runtime mmaps the NQ ring. FUSE cannot map daemon memory into the caller,
// so in the sim the runtime allocates the ring itself and passes its user
// address in `mmap_offset`; the device then "DMA-writes" entries into it
// with process_vm_writev, which is what the hardware does to host memory.
// Layout follows the driver's 48-byte argument (neuron.md section 1d).
struct trainsim_nq_init_v2 {
	uint32_t nq_dev_id;   // NC index
	uint32_t nq_dev_type; // 0: NC engine, 1: TOPSP
	uint32_t nq_type;     // 0: TRACE (execution notifications)
	uint32_t engine;
	uint32_t size;        // ring bytes
	uint32_t on_host_memory;
	uint32_t dram_channel;
	uint32_t dram_region;
	uint64_t mmap_offset; // sim: in = user VA of the ring
	uint64_t mem_handle;  // out
};
#ifdef __cplusplus
static_assert(sizeof(trainsim_nq_init_v2) == 48, "NOTIFICATIONS_INIT_V2 copies 48 bytes");
static_assert(sizeof(trainsim_desc) == NEURON_DMA_DESC_BYTES, "one descriptor is 16 bytes");
#endif

// One notification-queue entry. The device writes everything but `seq`
// first and `seq` last (separate writes), so a poller that sees its seq
// also sees the rest. Timestamps are CLOCK_MONOTONIC ns, the host clock.
struct trainsim_nq_entry {
	uint64_t t_start_ns;        // device began the execution (after the kick)
	uint64_t t_compute_end_ns;  // compute finished; collective starts
	uint64_t t_cc_ready_ns;     // every rank arrived at the collective
	uint64_t t_done_ns;         // collective transfer finished; completion posted
	uint64_t planned_compute_ns;
	uint64_t planned_cc_xfer_ns;
	int32_t status;             // 0 ok, else an NRT_STATUS
	uint32_t pad_;
	uint64_t seq;               // written last
};

#define TRAINSIM_NQ_ENTRIES 64

// Network proxy mailbox (sim): the runtime registers it with a second
// NOTIFICATIONS_INIT_V2 whose nq_dev_type is 1 (TOPSP, the queue family the
// collectives engine uses). When an execution reaches its device collective
// (every rank arrived), the device writes bytes/xfer_ns and then req_seq;
// the runtime's per-NC proxy thread does the network work (the transfer
// time; it accounts the bytes in the fake EFA counters) and stores done_seq.
// The device polls done_seq in host memory, so a proxy thread that waits
// for a CPU delays the collective, as on a real host.
struct trainsim_proxy_mailbox {
	uint64_t bytes;    // device all-reduce payload of this execution
	uint64_t xfer_ns;  // planned transfer time at the link rate
	uint64_t req_seq;  // written last by the device
	uint64_t done_seq; // written by the proxy when the transfer is done
};
#define TRAINSIM_NQ_DEV_TOPSP 1

// Neuron datastore (NDS) in the sim. The real driver returns the physical
// address of a 256 KiB slab in ACQUIRE_NEURON_DS's mmap_offset and the
// caller mmaps it on the device fd. A FUSE file cannot map daemon memory, so
// the fake device keeps its 16 slabs in a plain shared file and serves a
// symlink `<device>.nds` next to the device file that names it;
// mmap_offset is the slab's offset in that file. Readers map
// (mmap_offset, size) of that file read-only, the runtime read-write.
#define TRAINSIM_NDS_WINDOW_SUFFIX ".nds"
#define TRAINSIM_EXEC_ENGINE 0 // kicking this engine's queue starts execution

#endif // TRAINSIM_SIM_PROTOCOL_H
