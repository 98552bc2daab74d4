/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * neuron_uapi.h - the parts of the AWS Neuron driver's ioctl ABI that
 * steptrace decodes, shared by the BPF collectors, the userspace decoder and
 * the trainsim fake device.
 *
 * Written from the facts in shared/domain/neuron.md (driver 2.24.7, plus the
 * 2.30 additions). Only fixed-width types, so the same header compiles for
 * `-target bpf` (types from vmlinux.h) and for the host (types from
 * <linux/types.h>). Values are the full 32-bit command numbers computed on
 * x86_64: many Neuron ioctls encode a pointer size (8) in _IOC_SIZE while the
 * driver copies the whole struct, so we never trust _IOC_SIZE for decoding.
 */
#ifndef STEPTRACE_NEURON_UAPI_H
#define STEPTRACE_NEURON_UAPI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NEURON_IOC_MAGIC 0x4e /* 'N' - shared with NVMe: filter by device, never by magic */

#define NEURON_IOC_NR(cmd) (((cmd) >> 0) & 0xff)
#define NEURON_IOC_TYPE(cmd) (((cmd) >> 8) & 0xff)
#define NEURON_IOC_SIZE(cmd) (((cmd) >> 16) & 0x3fff)

/* Command values (see neuron.md section 1). */
enum neuron_ioctl_cmd {
	NEURON_CMD_DEVICE_INFO = 0x80084e03,
	NEURON_CMD_MEM_ALLOC = 0x80084e15,
	NEURON_CMD_MEM_FREE = 0x80084e16,
	NEURON_CMD_MEM_COPY = 0x80084e17,
	NEURON_CMD_MEM_COPY64 = 0x80284e17,
	NEURON_CMD_MEM_COPY64_V2 = 0x80384e17, /* >= 2.30, async-capable */
	NEURON_CMD_MEM_BUF_COPY = 0xc0084e18,
	NEURON_CMD_MEM_BUF_COPY64 = 0xc0284e18,
	NEURON_CMD_PROGRAM_ENGINE = 0xc0084e1b,
	NEURON_CMD_MEMSET = 0x80084e1c,
	NEURON_CMD_MEMSET64 = 0x80204e1c,
	NEURON_CMD_MEM_GET_EXTENDED_INFO = 0x80084e1d,
	NEURON_CMD_DMA_ENG_SET_STATE = 0x80084e1f,
	NEURON_CMD_DMA_QUEUE_INIT = 0x80084e21,
	NEURON_CMD_DMA_QUEUE_RELEASE = 0x80084e22,
	NEURON_CMD_DMA_QUEUE_COPY_START = 0x80084e23,
	NEURON_CMD_DMA_ACK_COMPLETED = 0x80084e24,
	NEURON_CMD_DMA_COPY_DESCRIPTORS = 0x80084e26,
	NEURON_CMD_DMA_COPY_DESCRIPTORS64 = 0x80284e26,
	NEURON_CMD_SEMAPHORE_INCREMENT = 0x80084e29,
	NEURON_CMD_SEMAPHORE_DECREMENT = 0x80084e2a,
	NEURON_CMD_SEMAPHORE_READ = 0xc0084e2b,
	NEURON_CMD_SEMAPHORE_WRITE = 0x80084e2c,
	NEURON_CMD_EVENT_SET = 0x80084e2d,
	NEURON_CMD_EVENT_GET = 0xc0084e2e,
	NEURON_CMD_NOTIFICATIONS_INIT_V2 = 0x80084e35,
	NEURON_CMD_ACQUIRE_NEURON_DS = 0x80084e47,
	NEURON_CMD_RELEASE_NEURON_DS = 0x80084e48,
	NEURON_CMD_CRWL_READER_ENTER = 0x40084e51,
	NEURON_CMD_CRWL_READER_EXIT = 0x40084e52,
	NEURON_CMD_CRWL_WRITER_ENTER = 0x40084e53,
	NEURON_CMD_CRWL_WRITER_DOWNGRADE = 0x40084e54,
	NEURON_CMD_CRWL_NC_RANGE_MARK = 0x40084e55,
	NEURON_CMD_CRWL_NC_RANGE_UNMARK = 0x40084e56,
	NEURON_CMD_CINIT_SET_STATE = 0x40084e5b,
	NEURON_CMD_MEM_ALLOC_V2 = 0x80084e66,
	NEURON_CMD_MEM_ALLOC_V2MT = 0x80304e66,
	NEURON_CMD_MEM_ALLOC_V2MT64 = 0x80384e66,
	NEURON_CMD_NC_RESET = 0x80084e67,
	NEURON_CMD_NC_RESET_READY = 0x80084e68,
	NEURON_CMD_PROGRAM_ENGINE_NC = 0xc0084e69,
	NEURON_CMD_PROGRAM_ENGINE_NC64 = 0xc0284e69,
	NEURON_CMD_DMABUF_FD = 0x80084e6b,
	NEURON_CMD_MEM_COPY_ASYNC = 0xc0304e6c,
	NEURON_CMD_MEM_COPY_ASYNC64 = 0xc0384e6c,
	NEURON_CMD_MEM_COPY_ASYNC_WAIT = 0x40184e6d,
	NEURON_CMD_DRIVER_INFO_GET = 0x80184e6e,
	NEURON_CMD_MEM_BUF_ZEROCOPY64 = 0xc0284e7c,
	NEURON_CMD_MEM_BUF_ZEROCOPY64_V2 = 0xc0404e7c, /* >= 2.30 */
	NEURON_CMD_MEM_BUF_ZEROCOPY64_BATCHES = 0xc0204e81,
	NEURON_CMD_DMA_QUEUE_INIT_BATCH = 0xb0084e85,
};

/*
 * Where the transfer size lives in each copy ioctl's user argument.
 * Offsets are for x86_64 (pointers are 8 bytes, u64 is 8-aligned).
 * All MEM_BUF_COPY/ZEROCOPY/MEM_COPY/COPY_ASYNC layouts start with two u64
 * words (handle/handle or handle/buffer), so size sits at byte 16.
 */
#define NEURON_ARG_SIZE_OFF_COMMON 16
/* PROGRAM_ENGINE_NC(64): u32 nc_id, (pad), u64 dst, void *buffer, size. */
#define NEURON_ARG_SIZE_OFF_PROGRAM_ENGINE_NC 24
/* MEMSET64: u64 handle, u64 offset, u32 value, (pad), u64 size. */
#define NEURON_ARG_SIZE_OFF_MEMSET64 24
/* MEMSET: u64 handle, u64 offset, u32 value, u32 size. */
#define NEURON_ARG_SIZE_OFF_MEMSET 20
/* MEM_BUF_COPY: direction flag after size and offset. */
#define NEURON_ARG_DIR_OFF_MEM_BUF_COPY 24
#define NEURON_ARG_DIR_OFF_MEM_BUF_COPY64 32
/* DMA_COPY_DESCRIPTORS(64): u32 num_descs at 16; one descriptor is 16 bytes. */
#define NEURON_ARG_NDESC_OFF 16
#define NEURON_DMA_DESC_BYTES 16

/* Argument layouts the fake device and the decoder use (x86_64). */
struct neuron_arg_mem_buf_copy64 {
	__u64 mem_handle;
	__u64 buffer; /* user pointer */
	__u64 size;
	__u64 offset;
	__u32 copy_to_mem_handle; /* 1: host -> device */
	__u32 pad_;
};

struct neuron_arg_mem_copy64 {
	__u64 src_mem_handle;
	__u64 dst_mem_handle;
	__u64 size;
	__u64 src_offset;
	__u64 dst_offset;
};

struct neuron_arg_program_engine_nc64 {
	__u32 nc_id;
	__u32 pad_;
	__u64 dst;
	__u64 buffer;
	__u64 size;
	__u64 offset;
};

struct neuron_arg_dma_copy_descriptors64 {
	__u64 mem_handle;
	__u64 buffer;
	__u32 num_descs;
	__u32 pad_;
	__u64 offset;
	__u32 queue_type;
	__u32 pad2_;
};

struct neuron_arg_dma_queue_copy_start {
	__u32 eng_id;
	__u32 qid;
	__u32 tx_desc_count;
	__u32 rx_desc_count;
};

struct neuron_arg_dma_ack_completed {
	__u32 eng_id;
	__u32 qid;
	__u32 count;
};

struct neuron_arg_semaphore {
	__u32 nc_id;
	__u32 index;
	__u32 value;
};

struct neuron_arg_mem_alloc_v2mt64 {
	__u64 size;
	__u64 align;
	__u32 host_memory;
	__u32 dram_channel;
	__u32 dram_region;
	__u32 nc_id;
	__u32 mem_type;
	__u32 pad0_;
	__u64 mem_handle_ptr; /* user pointer to a u64 */
	__u32 pad;
	__u32 pad1_;
};

struct neuron_arg_mem_free {
	__u64 mem_handle;
};

struct neuron_arg_neuron_ds_info {
	__s32 pid; /* 0: own datastore (writable); else another process's (read-only) */
	__u32 pad_;
	__u64 mmap_offset;
	__u32 size;
	__u32 pad2_;
};

/* Coarse class of each command, as the attribution sees it. */
enum neuron_ioctl_class {
	NEURON_CLASS_OTHER = 0,
	NEURON_CLASS_COPY = 1,    /* host<->device tensor copies (bytes known) */
	NEURON_CLASS_SUBMIT = 2,  /* DMA queue kicks, acks, descriptor writes, engine programming */
	NEURON_CLASS_SYNC = 3,    /* semaphores, events, CRWL, CINIT */
	NEURON_CLASS_SETUP = 4,   /* alloc/free/info/NQ/NDS/reset */
};

/*
 * The driver's classic tracepoints (neuron:*), as in its neuron_trace.h after
 * the 8-byte common header: the BPF programs read these (accel_ioctl.bpf.c)
 * and the loader checks tracefs's format files against the same offsets
 * (loader/kernel_text.cpp, from offsetof), so the two sides cannot drift.
 */
struct st_ntp_dma_queue_copy_start {
	__u64 common_;
	__u32 device_index;
	__u32 eng_id;
	__u32 qid;
	__u32 tx_desc_count;
	__u32 rx_desc_count;
};
struct st_ntp_dma_ack_completed {
	__u64 common_;
	__u32 device_index;
	__u32 eng_id;
	__u32 qid;
	__u32 count;
};
struct st_ntp_mem_copyio {
	__u64 common_;
	__u32 device_index;
	__u32 pad_;
	__u64 mc;
	__u64 buffer;
	__u32 offset; /* never assigned by the driver */
	__u32 size;
};

#ifdef __cplusplus
static_assert(sizeof(struct neuron_arg_mem_buf_copy64) == 40, "MEM_BUF_COPY64 copies 40 bytes");
static_assert(sizeof(struct neuron_arg_mem_copy64) == 40, "MEM_COPY64 copies 40 bytes");
static_assert(sizeof(struct neuron_arg_program_engine_nc64) == 40, "PROGRAM_ENGINE_NC64 copies 40 bytes");
static_assert(sizeof(struct neuron_arg_dma_copy_descriptors64) == 40, "DMA_COPY_DESCRIPTORS64 copies 40");
static_assert(sizeof(struct neuron_arg_dma_queue_copy_start) == 16, "DMA_QUEUE_COPY_START copies 16");
static_assert(sizeof(struct neuron_arg_dma_ack_completed) == 12, "DMA_ACK_COMPLETED copies 12");
static_assert(sizeof(struct neuron_arg_mem_alloc_v2mt64) == 56, "MEM_ALLOC_V2MT64 copies 56");
static_assert(sizeof(struct neuron_arg_neuron_ds_info) == 24, "ACQUIRE_NEURON_DS copies 24");
/* The driver's tracepoint offsets (its neuron_trace.h as of driver 2.x). */
static_assert(__builtin_offsetof(struct st_ntp_dma_queue_copy_start, device_index) == 8, "copy_start device_index");
static_assert(__builtin_offsetof(struct st_ntp_dma_queue_copy_start, rx_desc_count) == 24, "copy_start rx_desc_count");
static_assert(__builtin_offsetof(struct st_ntp_dma_ack_completed, count) == 20, "ack_completed count");
static_assert(__builtin_offsetof(struct st_ntp_mem_copyio, size) == 36, "mem_copyin/out size");
#endif

#endif /* STEPTRACE_NEURON_UAPI_H */
