/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * nrt.h - the fake Neuron runtime (libnrt.so.1) that trainsim links to.
 *
 * Entry points keep the real libnrt names and C ABI (SDK
 * src/libnrt/include/nrt/nrt.h) so steptrace's uprobes on nrt_execute,
 * nrt_tensor_write and nrt_tensor_read attach the same way. Types are
 * simplified; the trainsim_* functions at the end exist only in the sim.
 *
 * Device selection: the real runtime uses NEURON_RT_VISIBLE_CORES and
 * /dev/neuronN. The sim opens the file named by $TRAINSIM_NEURON_DEVICE.
 */
#ifndef TRAINSIM_NRT_H
#define TRAINSIM_NRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	NRT_SUCCESS = 0,
	NRT_FAILURE = 1,
	NRT_INVALID = 2,
	NRT_INVALID_HANDLE = 3,
	NRT_RESOURCE = 4,
	NRT_TIMEOUT = 5,
	NRT_HW_ERROR = 6,
	NRT_UNINITIALIZED = 13,
	NRT_CLOSED = 14,
	NRT_EXEC_HW_ERR_COLLECTIVES = 1200,
} NRT_STATUS;

typedef enum {
	NRT_FRAMEWORK_TYPE_INVALID = 0,
	NRT_FRAMEWORK_TYPE_NO_FW = 1,
	NRT_FRAMEWORK_TYPE_TENSORFLOW = 2,
	NRT_FRAMEWORK_TYPE_PYTORCH = 3,
	NRT_FRAMEWORK_TYPE_MXNET = 4,
} nrt_framework_type_t;

typedef enum {
	NRT_TENSOR_PLACEMENT_DEVICE = 0,
	NRT_TENSOR_PLACEMENT_HOST = 1,
	NRT_TENSOR_PLACEMENT_VIRTUAL = 2,
} nrt_tensor_placement_t;

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef struct nrt_tensor_set nrt_tensor_set_t;

#define NRT_API __attribute__((visibility("default"), noinline))

NRT_API NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version, const char *fal_version);
NRT_API void nrt_close(void);
/* neff_bytes: a struct trainsim_neff followed by any padding (sim_protocol.h). */
NRT_API NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t start_nc, int32_t nc_count,
			    nrt_model_t **model);
NRT_API NRT_STATUS nrt_unload(nrt_model_t *model);
NRT_API NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int logical_nc_id, size_t size,
				       const char *name, nrt_tensor_t **tensor);
NRT_API void nrt_tensor_free(nrt_tensor_t **tensor);
/* One MEM_BUF_COPY64 ioctl per call (host -> device). */
NRT_API NRT_STATUS nrt_tensor_write(nrt_tensor_t *tensor, const void *buf, size_t offset, size_t size);
/* One MEM_BUF_COPY64 ioctl per call (device -> host). */
NRT_API NRT_STATUS nrt_tensor_read(const nrt_tensor_t *tensor, void *buf, size_t offset, size_t size);
NRT_API NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t **result);
NRT_API void nrt_destroy_tensor_set(nrt_tensor_set_t **tensor_set);
NRT_API NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name,
						nrt_tensor_t *tensor);
/* DMA_COPY_DESCRIPTORS64 + DMA_QUEUE_COPY_START kicks, then busy-polls the
 * notification queue with sched_yield() between polls, then
 * DMA_ACK_COMPLETED. Synchronous, like the real default. */
NRT_API NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *input_set,
			       nrt_tensor_set_t *output_set);

/* ---- sim only: what the device reported for the last execution ---- */
struct trainsim_exec_info {
	uint64_t seq;
	uint64_t t_enter_ns;        /* nrt_execute entered */
	uint64_t t_kicked_ns;       /* last queue kick returned */
	uint64_t t_dev_start_ns;    /* device timestamps from the NQ entry */
	uint64_t t_compute_end_ns;
	uint64_t t_cc_ready_ns;
	uint64_t t_done_ns;
	uint64_t t_seen_ns;         /* the poll loop saw the completion */
	uint64_t t_return_ns;       /* after DMA_ACK_COMPLETED */
	uint64_t planned_compute_ns;
	uint64_t planned_cc_xfer_ns;
	uint64_t polls;             /* sched_yield calls while waiting */
	int32_t status;
	int32_t have_run_delay;     /* the rd_* fields are valid */
	/* The calling thread's schedstat run_delay (ns, cumulative) at enter,
	 * after the kicks, when the poll loop saw completion, and at return:
	 * the ground truth's per-phase runqueue wait inside the call. */
	uint64_t rd_enter_ns, rd_kicked_ns, rd_seen_ns, rd_return_ns;
};
NRT_API int trainsim_nrt_last_exec(struct trainsim_exec_info *out);
/* Sets the device compute time of every later execution of `model` (a
 * COMPUTE descriptor before each EXEC descriptor) instead of the program's.
 * Once set, every execution carries one. 0 or -1. */
NRT_API int trainsim_nrt_set_compute_ns(nrt_model_t *model, uint64_t compute_ns);
/* Host-driven collective traffic of this rank (bytes each way): the sim's
 * network layer accounts it in the fake EFA counters (efa_<device index>
 * under $TRAINSIM_SYSFS_ROOT). */
NRT_API void trainsim_nrt_net_traffic(uint64_t tx_bytes, uint64_t rx_bytes);
/* The device file libnrt opened, or NULL before nrt_init. */
NRT_API const char *trainsim_nrt_device_path(void);
/* EFA control path (uverbs calls on $TRAINSIM_UVERBS_DEVICE), each as the
 * runtime saw it: nrt_load sets up, nrt_close tears down. */
struct trainsim_verb_call {
	char name[24];       /* "reg_mr", "create_qp", ... (steptrace's names) */
	uint64_t enter_ns;   /* CLOCK_MONOTONIC around the syscall */
	uint64_t return_ns;
	uint64_t bytes;      /* registrations: the region's length */
	int32_t ret;         /* 0 or -errno */
	int32_t pad_;
};
/* Copies up to `max` logged calls into `out`; returns how many were logged. */
NRT_API int trainsim_nrt_verb_calls(struct trainsim_verb_call *out, int max);
/* Registers and deregisters a `bytes` buffer with the adapter, as a
 * communication library does when its registration cache misses. 0 or -errno;
 * 0 without an adapter. */
NRT_API int trainsim_nrt_register_buffer(uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* TRAINSIM_NRT_H */
