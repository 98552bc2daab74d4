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
#include "rq_track.h"

/*
 * Requests of target tasks from insert/issue to completion (rq_track.h has
 * the rules that keep a reused request address from inheriting an owner).
 * A plain hash: a target's request that finds it full is counted
 * (ST_LOSS_BLOCK_RQ), never silently missing; entries leave at completion,
 * merge, or when the next request at their address replaces them.
 */
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
	struct st_rq_state *st, next = {};
	int stale = 0, target;

	if (!(st_cfg.enabled & ST_SUB_BLOCK))
		return 0;
	st = bpf_map_lookup_elem(&st_rq, &key);
	/* Most requests are not a target's and have no entry: no filter, no clock. */
	target = st_current_is_target();
	if (!st && !target)
		return 0;
	switch (st_rq_step(st, issue, target, id >> 32, (__u32)id, bpf_ktime_get_ns(), &next, &stale)) {
	case ST_RQA_CONTINUE:
		*st = next;
		break;
	case ST_RQA_START:
		if (bpf_map_update_elem(&st_rq, &key, &next, BPF_ANY))
			st_count_loss(ST_LOSS_BLOCK_RQ);
		break;
	case ST_RQA_FORGET:
		bpf_map_delete_elem(&st_rq, &key);
		break;
	default:
		break;
	}
	if (stale)
		st_count_ledger(ST_LEDGER_RQ_STALE);
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

/* Busy driver: the request goes back and is inserted or issued again. */
SEC("tp_btf/block_rq_requeue")
int BPF_PROG(st_block_rq_requeue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct st_rq_state *st = bpf_map_lookup_elem(&st_rq, &key);

	if (st)
		st_rq_requeued(st);
	return 0;
}

/* `rq` was merged into another request and is freed without completing. */
SEC("tp_btf/block_rq_merge")
int BPF_PROG(st_block_rq_merge, struct request *rq)
{
	__u64 key = (__u64)rq;

	bpf_map_delete_elem(&st_rq, &key);
	return 0;
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
