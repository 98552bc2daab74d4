/* SPDX-License-Identifier: GPL-2.0 */
/*
 * neuron_trace.h - tracepoints of the mock Neuron driver.
 *
 * Same system ("neuron"), event names, field names and field types as the
 * real AWS driver's neuron_trace.h (driver 2.24.7, see
 * shared/domain/neuron.md section 2), so a tracer attaching to
 * neuron:<event> sees the same format file. TP_printk only prints plain
 * fields: the real driver dereferences the mem_chunk pointers in TP_printk,
 * which newer kernels flag as unsafe.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM neuron

#if !defined(MOCK_NEURON_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define MOCK_NEURON_TRACE_H

#include <linux/tracepoint.h>
#include "neuron_mock.h"

TRACE_EVENT(dma_queue_init,
	TP_PROTO(struct neuron_device *nd, u32 eng_id, u32 qid, u32 tx_desc_count, u32 rx_desc_count,
		 struct mem_chunk *tx_mc, struct mem_chunk *rx_mc, struct mem_chunk *rxc_mc, u32 port),
	TP_ARGS(nd, eng_id, qid, tx_desc_count, rx_desc_count, tx_mc, rx_mc, rxc_mc, port),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(u32, eng_id)
		__field(u32, qid)
		__field(u32, tx_desc_count)
		__field(u32, rx_desc_count)
		__field(struct mem_chunk *, tx_mc)
		__field(struct mem_chunk *, rx_mc)
		__field(struct mem_chunk *, rxc_mc)
		__field(u32, port)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->eng_id = eng_id;
		__entry->qid = qid;
		__entry->tx_desc_count = tx_desc_count;
		__entry->rx_desc_count = rx_desc_count;
		__entry->tx_mc = tx_mc;
		__entry->rx_mc = rx_mc;
		__entry->rxc_mc = rxc_mc;
		__entry->port = port;),
	TP_printk("nd%u eng%u q%u tx_count %u rx_count %u port %u", __entry->device_index,
		  __entry->eng_id, __entry->qid, __entry->tx_desc_count, __entry->rx_desc_count,
		  __entry->port));

TRACE_EVENT(dma_queue_release,
	TP_PROTO(struct neuron_device *nd, u32 eng_id, u32 qid),
	TP_ARGS(nd, eng_id, qid),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(u32, eng_id)
		__field(u32, qid)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->eng_id = eng_id;
		__entry->qid = qid;),
	TP_printk("nd%u eng%u q%u", __entry->device_index, __entry->eng_id, __entry->qid));

TRACE_EVENT(dma_queue_copy_start,
	TP_PROTO(struct neuron_device *nd, u32 eng_id, u32 qid, u32 tx_desc_count, u32 rx_desc_count),
	TP_ARGS(nd, eng_id, qid, tx_desc_count, rx_desc_count),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(u32, eng_id)
		__field(u32, qid)
		__field(u32, tx_desc_count)
		__field(u32, rx_desc_count)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->eng_id = eng_id;
		__entry->qid = qid;
		__entry->tx_desc_count = tx_desc_count;
		__entry->rx_desc_count = rx_desc_count;),
	TP_printk("nd%u eng%u q%u tx_count %u rx_count %u", __entry->device_index, __entry->eng_id,
		  __entry->qid, __entry->tx_desc_count, __entry->rx_desc_count));

TRACE_EVENT(dma_ack_completed,
	TP_PROTO(struct neuron_device *nd, u32 eng_id, u32 qid, u32 count),
	TP_ARGS(nd, eng_id, qid, count),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(u32, eng_id)
		__field(u32, qid)
		__field(u32, count)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->eng_id = eng_id;
		__entry->qid = qid;
		__entry->count = count;),
	TP_printk("nd%u eng%u qid%u count %u", __entry->device_index, __entry->eng_id, __entry->qid,
		  __entry->count));

/* The real driver also emits this one from MEM_FREE (ioctl_mem_free is never fired). */
TRACE_EVENT(ioctl_mem_alloc,
	TP_PROTO(struct neuron_device *nd, struct mem_chunk *mc),
	TP_ARGS(nd, mc),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(struct mem_chunk *, mc)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->mc = mc;),
	TP_printk("nd%u mc %p", __entry->device_index, __entry->mc));

/* Fired after the copy completes. */
TRACE_EVENT(ioctl_mem_copy,
	TP_PROTO(struct neuron_device *nd, struct mem_chunk *src, struct mem_chunk *dst),
	TP_ARGS(nd, src, dst),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(struct mem_chunk *, src)
		__field(struct mem_chunk *, dst)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->src = src;
		__entry->dst = dst;),
	TP_printk("nd%u src %p dst %p", __entry->device_index, __entry->src, __entry->dst));

/*
 * copyin/copyout: fired before the copy. Like the real driver, `offset` is
 * never assigned (the ring-buffer slot keeps whatever was there).
 */
DECLARE_EVENT_CLASS(neuron_mem_copyio,
	TP_PROTO(struct neuron_device *nd, struct mem_chunk *mc, void *buffer, u32 offset, u32 size),
	TP_ARGS(nd, mc, buffer, offset, size),
	TP_STRUCT__entry(
		__field(u32, device_index)
		__field(struct mem_chunk *, mc)
		__field(void *, buffer)
		__field(u32, offset)
		__field(u32, size)),
	TP_fast_assign(
		__entry->device_index = nd->device_index;
		__entry->mc = mc;
		__entry->buffer = buffer;
		__entry->size = size;),
	TP_printk("nd%u mc %p buffer %p (%u bytes)", __entry->device_index, __entry->mc,
		  __entry->buffer, __entry->size));
DEFINE_EVENT(neuron_mem_copyio, ioctl_mem_copyin,
	TP_PROTO(struct neuron_device *nd, struct mem_chunk *mc, void *buffer, u32 offset, u32 size),
	TP_ARGS(nd, mc, buffer, offset, size));
DEFINE_EVENT(neuron_mem_copyio, ioctl_mem_copyout,
	TP_PROTO(struct neuron_device *nd, struct mem_chunk *mc, void *buffer, u32 offset, u32 size),
	TP_ARGS(nd, mc, buffer, offset, size));

#endif /* MOCK_NEURON_TRACE_H */

#undef TRACE_INCLUDE_PATH
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_PATH .
#define TRACE_INCLUDE_FILE neuron_trace
#include <trace/define_trace.h>
