/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * rq_track.h - which task a block request belongs to, kept in st_rq keyed by
 * the request's address from insert/issue to completion (block.bpf.c).
 * Pure C with no helpers: the unit tests compile it natively and drive it
 * through the sequences the block layer produces (tests/unit/test_rq_track.cpp).
 *
 * Request structs come from preallocated tag sets, so an address is reused
 * by request after request. An entry whose request never completed (merged
 * away into another request, freed on an error path before issue, dropped
 * with a queue) must not hand its pid/tid to the next request at that
 * address. The cheapest correct rule, with no per-request sequence to key
 * on (rq->start_time_ns is 0 on queues without I/O accounting), is to keep
 * a phase in the entry and accept only the transitions one request makes:
 *
 *   insert            -> INSERTED  (a new request: always a fresh entry)
 *   INSERTED  + issue -> ISSUED    (the same request, dispatched)
 *   ISSUED    + requeue -> REQUEUED (busy driver; block_rq_requeue)
 *   REQUEUED  + insert or issue -> the same request again
 *   complete or merge -> entry deleted
 *
 * Anything else meets an entry of an earlier request (an issue after an
 * issue, an insert that is not a requeue's): it is replaced by the new
 * request's owner, or deleted when the new request is not a target's.
 * Deleting on merge (block_rq_merge) also keeps the one case the phases
 * cannot tell apart - merged away while INSERTED, then the address reused
 * by a request issued directly - from happening, and keeps st_rq bounded
 * (stale entries are at most one per request address anyway).
 */
#ifndef STEPTRACE_RQ_TRACK_H
#define STEPTRACE_RQ_TRACK_H

#define ST_RQ_PHASE_INSERTED 1
#define ST_RQ_PHASE_ISSUED 2
#define ST_RQ_PHASE_REQUEUED 3

struct st_rq_state {
	__u64 insert_ts;  /* 0 when the request bypassed the scheduler */
	__u64 issue_ts;
	__u32 pid;
	__u32 tid;
	__u32 phase;      /* ST_RQ_PHASE_* */
	__u32 pad_;
};

enum st_rq_action {
	ST_RQA_NONE = 0,     /* nothing to store: not a target's request, no entry */
	ST_RQA_CONTINUE = 1, /* the entry is this request's: store *next over it */
	ST_RQA_START = 2,    /* a target's new request: store *next (BPF_ANY) */
	ST_RQA_FORGET = 3,   /* a non-target's new request over a stale entry: delete it */
};

/*
 * At block_rq_insert (issue = 0) or block_rq_issue (issue = 1) of a request
 * whose address has entry `cur` (NULL: none). `target`: the current task is
 * traced; pid/tid/now describe it. Fills *next for CONTINUE and START.
 * *stale is set when `cur` belonged to an earlier request.
 */
static inline __attribute__((always_inline)) enum st_rq_action
st_rq_step(const struct st_rq_state *cur, int issue, int target, __u32 pid,
	   __u32 tid, __u64 now, struct st_rq_state *next, int *stale)
{
	*stale = 0;
	if (cur) {
		int same = issue ? (cur->phase == ST_RQ_PHASE_INSERTED || cur->phase == ST_RQ_PHASE_REQUEUED)
				 : cur->phase == ST_RQ_PHASE_REQUEUED;

		if (same) {
			*next = *cur;
			if (issue) {
				next->issue_ts = now;
				next->phase = ST_RQ_PHASE_ISSUED;
			} else {
				next->phase = ST_RQ_PHASE_INSERTED;
			}
			return ST_RQA_CONTINUE;
		}
		*stale = 1;
	}
	if (!target)
		return cur ? ST_RQA_FORGET : ST_RQA_NONE;
	next->insert_ts = issue ? 0 : now;
	next->issue_ts = issue ? now : 0;
	next->pid = pid;
	next->tid = tid;
	next->phase = issue ? ST_RQ_PHASE_ISSUED : ST_RQ_PHASE_INSERTED;
	next->pad_ = 0;
	return ST_RQA_START;
}

/* At block_rq_requeue: the request will be inserted or issued again. */
static inline __attribute__((always_inline)) void st_rq_requeued(struct st_rq_state *cur)
{
	cur->phase = ST_RQ_PHASE_REQUEUED;
}

#endif /* STEPTRACE_RQ_TRACK_H */
