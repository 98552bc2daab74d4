// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * block.bpf.c - block requests of target threads: insert -> issue -> complete
 * latency, bytes, direction, device and the tid that caused the request.
 *
 * The submitter is taken from the task context at insert or issue (direct and
 * plugged I/O is issued from the submitting task); completion runs in IRQ
 * context, so the request carries its owner in st_rq until then.
 */
#include "common.bpf.h"

struct st_rq_state {
	__u64 insert_ts;
	__u64 issue_ts;
	__u32 pid;
	__u32 tid;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ST_MAX_INFLIGHT_RQ);
	__type(key, __u64);
	__type(value, struct st_rq_state);
} st_rq SEC(".maps");

#define ST_REQ_OP_MASK 0xff
#define ST_REQ_OP_READ 0
#define ST_REQ_OP_WRITE 1
#define ST_REQ_OP_FLUSH 2
#define ST_REQ_SYNC (1u << 11) /* __REQ_SYNC: stable since 4.10 */

static __always_inline int st_rq_begin(struct request *rq, bool issue)
{
	__u64 key = (__u64)rq;
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct st_rq_state *st, init = {};

	if (!(st_cfg.enabled & ST_SUB_BLOCK))
		return 0;
	st = bpf_map_lookup_elem(&st_rq, &key);
	if (st) {
		if (issue)
			st->issue_ts = now;
		return 0;
	}
	if (!st_current_is_target())
		return 0;
	init.pid = id >> 32;
	init.tid = (__u32)id;
	if (issue)
		init.issue_ts = now;
	else
		init.insert_ts = now;
	bpf_map_update_elem(&st_rq, &key, &init, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(st_block_rq_insert, struct request *rq)
{
	return st_rq_begin(rq, false);
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(st_block_rq_issue, struct request *rq)
{
	return st_rq_begin(rq, true);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(st_block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct st_rq_state *st = bpf_map_lookup_elem(&st_rq, &key);
	struct st_block_rq *e;
	struct block_device *part;
	__u32 op, cmd_flags;

	if (!st)
		return 0;
	cmd_flags = BPF_CORE_READ(rq, cmd_flags);
	op = cmd_flags & ST_REQ_OP_MASK;
	if (st_aggregate) {
		struct st_proc_agg *agg = st_proc_agg_get(st->pid);

		if (agg) {
			if (op == ST_REQ_OP_WRITE)
				agg->block_write_bytes += nr_bytes;
			else if (op == ST_REQ_OP_READ)
				agg->block_read_bytes += nr_bytes;
			agg->block_rqs++;
		}
	}
	/* Detail off: no record, but the request is still forgotten below. */
	e = st_detail ? st_reserve_for(sizeof(*e), ST_EV_BLOCK_RQ, st->pid, st->tid, bpf_ktime_get_ns()) : NULL;
	if (e) {
		e->insert_ts = st->insert_ts;
		e->issue_ts = st->issue_ts;
		e->sector = BPF_CORE_READ(rq, __sector);
		part = BPF_CORE_READ(rq, part);
		e->dev = part ? BPF_CORE_READ(part, bd_dev) : 0;
		e->bytes = nr_bytes;
		e->op = op;
		e->flags = (op == ST_REQ_OP_WRITE ? ST_RQ_WRITE : 0) |
			   (cmd_flags & ST_REQ_SYNC ? ST_RQ_SYNC : 0) |
			   (op == ST_REQ_OP_FLUSH ? ST_RQ_FLUSH : 0);
		e->error = error;
		e->pad_ = 0;
		st_submit(e);
	}
	/* A partial completion ends the record too: rare for file I/O, and it keeps st_rq bounded. */
	bpf_map_delete_elem(&st_rq, &key);
	return 0;
}
