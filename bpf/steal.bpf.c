// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * steal.bpf.c - time the host takes from target threads: hardirq and softirq
 * handlers that run while a target is current (network receive for the
 * collective, storage completions), and memory reclaim a target runs itself
 * (direct reclaim, or its cgroup at its limit / memory.high).
 *
 * Interrupts fire host-wide at up to millions per second, so nothing is sent
 * per handler: the time is added into the interrupted thread's task state
 * and sent once per on-CPU slice by the sched collector (sched.bpf.c). A
 * handler that interrupts another task costs one per-CPU lookup and a
 * compare. CPU throttling needs no hook of its own: the sched collector
 * flags the switch-outs of a throttled cgroup (ST_SWITCH_THROTTLED).
 */
#include "common.bpf.h"
#include "arch_x86.h" /* syscall numbers */

/* A call that can move socket bytes (its softirqs are its own work). */
static __always_inline bool st_sys_is_net(__s32 nr)
{
	return nr == ST_NR_READ || nr == ST_NR_WRITE || nr == ST_NR_READV || nr == ST_NR_WRITEV ||
	       nr == ST_NR_SENDTO || nr == ST_NR_RECVFROM || nr == ST_NR_SENDMSG || nr == ST_NR_RECVMSG ||
	       nr == ST_NR_RECVMMSG || nr == ST_NR_SENDMMSG;
}

/* The interrupted task is a target: the per-CPU tid set at its switch-in
 * matches current (a stale tid of a target gone from this CPU does not). */
static __always_inline struct st_cpu_state *st_target_current_cpu(void)
{
	struct st_cpu_state *c;

	if (!(st_cfg.enabled & ST_SUB_STEAL) || !st_detail)
		return NULL;
	c = st_cpu_state();
	if (!c || !c->cur_target_tid || c->cur_target_tid != (__u32)bpf_get_current_pid_tgid())
		return NULL;
	return c;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(st_irq_entry)
{
	struct st_cpu_state *c = st_target_current_cpu();

	if (c)
		c->hardirq_start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(st_irq_exit)
{
	struct st_cpu_state *c = st_cpu_state();
	struct st_task_state *ts;
	__u64 d;

	if (!c || !c->hardirq_start)
		return 0;
	d = bpf_ktime_get_ns() - c->hardirq_start;
	if (c->softirq_start)
		c->hardirq_in_softirq += d;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (ts) {
		if (!ts->irq_since)
			ts->irq_since = c->hardirq_start;
		ts->irq_ns += d;
		ts->irq_count++;
	}
	c->hardirq_start = 0;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(st_softirq_entry, unsigned int vec_nr)
{
	struct st_cpu_state *c = st_target_current_cpu();

	if (!c)
		return 0;
	/* Network softirqs run inside the thread's own send or receive call
	 * (loopback delivery at local_bh_enable, its NAPI busy poll) are that
	 * call's work, not time taken from it: only those that interrupt it
	 * outside a syscall, or in another one, count. */
	if ((vec_nr == 2 /* NET_TX */ || vec_nr == 3 /* NET_RX */) &&
	    st_sys_is_net(st_task_syscall(bpf_get_current_task_btf(), NULL)))
		return 0;
	c->softirq_start = bpf_ktime_get_ns();
	c->softirq_vec = vec_nr;
	c->hardirq_in_softirq = 0;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(st_softirq_exit, unsigned int vec_nr)
{
	struct st_cpu_state *c = st_cpu_state();
	struct st_task_state *ts;
	__u64 d;

	if (!c || !c->softirq_start)
		return 0;
	d = bpf_ktime_get_ns() - c->softirq_start;
	d = d > c->hardirq_in_softirq ? d - c->hardirq_in_softirq : 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (ts) {
		if (!ts->irq_since)
			ts->irq_since = c->softirq_start;
		ts->softirq_ns += d;
		ts->softirq_count++;
		if (c->softirq_vec < 32)
			ts->softirq_vecs |= 1u << c->softirq_vec;
	}
	c->softirq_start = 0;
	return 0;
}

/* ---- memory reclaim run by a target thread ---- */

static __always_inline int st_reclaim_begin(__u32 kind)
{
	struct st_task_state *ts;

	if (!(st_cfg.enabled & ST_SUB_STEAL) || !st_detail || !st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), true);
	if (!ts || ts->reclaim_start)
		return 0; /* a pass inside a pass: the outer one holds the time */
	ts->reclaim_start = bpf_ktime_get_ns();
	ts->reclaim_kind = kind;
	return 0;
}

static __always_inline int st_reclaim_end(__u32 kind, unsigned long nr_reclaimed)
{
	struct st_task_state *ts;
	struct st_host_steal *e;
	__u64 now, start;

	if (!(st_cfg.enabled & ST_SUB_STEAL))
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (!ts || !ts->reclaim_start || ts->reclaim_kind != kind)
		return 0;
	start = ts->reclaim_start;
	ts->reclaim_start = 0;
	if (!st_detail)
		return 0;
	now = bpf_ktime_get_ns();
	e = st_reserve(sizeof(*e), ST_EV_HOST_STEAL);
	if (!e)
		return 0;
	e->hdr.ts_ns = now;
	e->start_ns = start;
	e->ns = now - start;
	e->kind = kind;
	e->count = nr_reclaimed > 0xffffffffUL ? 0xffffffffu : (__u32)nr_reclaimed;
	e->detail = 0;
	e->pad_ = 0;
	st_submit(e);
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(st_direct_reclaim_begin)
{
	return st_reclaim_begin(ST_STEAL_DIRECT_RECLAIM);
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(st_direct_reclaim_end, unsigned long nr_reclaimed)
{
	return st_reclaim_end(ST_STEAL_DIRECT_RECLAIM, nr_reclaimed);
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(st_memcg_reclaim_begin)
{
	return st_reclaim_begin(ST_STEAL_MEMCG_RECLAIM);
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(st_memcg_reclaim_end, unsigned long nr_reclaimed)
{
	return st_reclaim_end(ST_STEAL_MEMCG_RECLAIM, nr_reclaimed);
}
