/* SPDX-License-Identifier: GPL-2.0 */
/*
 * neuron_mock.h - the two driver structs the tracepoints take.
 *
 * Field offsets follow the real driver 2.24.7 on x86_64 (neuron.md: device_index
 * at +8 of struct neuron_device; pa +32, va +40, size +48, nc_id +88 of struct
 * mem_chunk), so a tracer decoding these pointers sees the same layout.
 */
#ifndef MOCK_NEURON_MOCK_H
#define MOCK_NEURON_MOCK_H

#include <linux/types.h>

struct neuron_device {
	void *pdev; /* no PCI device in the mock */
	u32 device_index;
};

struct mem_chunk {
	u64 rsvd0[4];
	u64 pa;
	void *va;
	u64 size;
	u64 rsvd1[4];
	u32 nc_id;
	u32 host_memory; /* mock: 1 = host chunk, 0 = "device" (HBM) chunk */
	bool in_use;
};

#endif
