/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * rdma_uapi.h - the parts of the kernel's ib_uverbs ABI (/dev/infiniband/
 * uverbsK) that steptrace decodes to show the EFA control path (protection
 * domains, queue pairs, completion queues, memory registrations): shared by
 * the BPF collector, the userspace namer and trainsim's fake adapter.
 *
 * Values from the uapi headers rdma/rdma_user_ioctl_cmds.h,
 * rdma/ib_user_ioctl_cmds.h and rdma/ib_user_verbs.h (x86_64; see
 * shared/domain/device-counters.md section 2.6). Ids are append-only in the
 * kernel, so these never change meaning.
 */
#ifndef STEPTRACE_RDMA_UAPI_H
#define STEPTRACE_RDMA_UAPI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr): the one ioctl of uverbs. */
#define RDMA_VERBS_IOCTL_CMD 0xc0181b01u

/* struct ib_uverbs_ioctl_hdr (24 bytes), then num_attrs x struct ib_uverbs_attr (16). */
#define UVERBS_HDR_OFF_OBJECT 2
#define UVERBS_HDR_OFF_METHOD 4
#define UVERBS_HDR_OFF_NUM_ATTRS 6
#define UVERBS_HDR_BYTES 24
#define UVERBS_ATTR_BYTES 16
#define UVERBS_ATTR_OFF_DATA 8

/* Core objects (UVERBS_OBJECT_*). */
enum {
	UVERBS_OBJ_DEVICE = 0,
	UVERBS_OBJ_PD = 1,
	UVERBS_OBJ_COMP_CHANNEL = 2,
	UVERBS_OBJ_CQ = 3,
	UVERBS_OBJ_QP = 4,
	UVERBS_OBJ_SRQ = 5,
	UVERBS_OBJ_AH = 6,
	UVERBS_OBJ_MR = 7,
};

/* Methods that matter for the control path. */
enum {
	UVERBS_METH_INVOKE_WRITE = 0,  /* DEVICE: a legacy command wrapped in an ioctl */
	UVERBS_METH_QUERY_PORT = 2,    /* DEVICE */
	UVERBS_METH_GET_CONTEXT = 3,   /* DEVICE */
	UVERBS_METH_MR_DESTROY = 1,    /* MR */
	UVERBS_METH_REG_DMABUF_MR = 4, /* MR: the Neuron path (dma-buf of device memory) */
	UVERBS_METH_CREATE = 0,        /* CQ, QP */
	UVERBS_METH_DESTROY = 1,       /* CQ, QP; PD and AH destroy are method 0 */
};

/* Attribute ids: INVOKE_WRITE's legacy command number (inline), its input
 * struct (pointer), and REG_DMABUF_MR's length (inline u64). */
#define UVERBS_ATTR_CORE_IN 0
#define UVERBS_ATTR_WRITE_CMD 2
#define UVERBS_ATTR_REG_DMABUF_MR_LENGTH 3

/* Legacy write(2) path: struct ib_uverbs_cmd_hdr {u32 command; u16 in_words; u16 out_words;}. */
#define UVERBS_CMD_HDR_BYTES 8
#define UVERBS_CMD_EXTENDED (1u << 31)
#define UVERBS_CMD_MASK 0xffu

/* Legacy command numbers (IB_USER_VERBS_CMD_*). */
enum {
	UVERBS_CMD_GET_CONTEXT = 0,
	UVERBS_CMD_QUERY_DEVICE = 1,
	UVERBS_CMD_QUERY_PORT = 2,
	UVERBS_CMD_ALLOC_PD = 3,
	UVERBS_CMD_DEALLOC_PD = 4,
	UVERBS_CMD_CREATE_AH = 5,
	UVERBS_CMD_DESTROY_AH = 8,
	UVERBS_CMD_REG_MR = 9,
	UVERBS_CMD_DEREG_MR = 13,
	UVERBS_CMD_CREATE_COMP_CHANNEL = 17,
	UVERBS_CMD_CREATE_CQ = 18,
	UVERBS_CMD_DESTROY_CQ = 20,
	UVERBS_CMD_CREATE_QP = 24,
	UVERBS_CMD_QUERY_QP = 25,
	UVERBS_CMD_MODIFY_QP = 26,
	UVERBS_CMD_DESTROY_QP = 27,
};

/* struct ib_uverbs_reg_mr: response u64, start u64, length u64, ... */
#define UVERBS_REG_MR_OFF_LENGTH 16

/* Char devices: "infiniband_verbs" in /proc/devices (231 for the first 32). */
#define UVERBS_FIRST_MINOR 192

#endif /* STEPTRACE_RDMA_UAPI_H */
