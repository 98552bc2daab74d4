/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * core_fixes.bpf.h - the one place where kernel drift that CO-RE cannot
 * absorb by itself is handled. Each shim names the kernel change.
 */
#ifndef STEPTRACE_CORE_FIXES_BPF_H
#define STEPTRACE_CORE_FIXES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>

/*
 * sched_process_exit: v6.16-ish kernels pass (task, group_dead); 6.1 passes
 * (task). We never read the second argument: sched.bpf.c derives group_dead
 * from signal->live, which do_exit() decrements before the tracepoint on
 * every kernel we target.
 *
 * tcp_retransmit_skb: 6.1 passes (sk, skb); newer kernels append a reason.
 * We read only the first argument.
 *
 * sock:sock_send_length / sock_recv_length (v6.3, commit "net: add
 * sock_send_length/sock_recv_length tracepoints") do not exist on 6.1: the
 * loader disables those programs there and reports the net tier it chose.
 */

/* struct sock_common's skc_v6_*: present only with CONFIG_IPV6. */
static __always_inline bool st_sk_has_v6(void)
{
	return bpf_core_field_exists(struct sock_common, skc_v6_daddr);
}

/*
 * struct sched_info's run_delay/last_queued exist only with CONFIG_SCHED_INFO
 * (selected by SCHEDSTATS or TASK_DELAY_ACCT: on in Debian, Ubuntu and AL2023
 * kernels). Without them the queue wait is reported unknown and userspace
 * falls back to wake-up-to-run time.
 */
static __always_inline bool st_has_sched_info(void)
{
	return bpf_core_field_exists(struct sched_info, last_queued) &&
	       bpf_core_field_exists(struct sched_info, run_delay);
}

/*
 * CFS bandwidth control (CONFIG_CFS_BANDWIDTH, under CONFIG_FAIR_GROUP_SCHED):
 * a task's cfs_rq->throttle_count is > 0 while its cgroup or any ancestor is
 * throttled. A plain int on 6.1-6.18; cfs_rq->throttled is a 1-bit field on
 * 6.18 (clang 14 crashed on a CO-RE bitfield read of it) and 6.18's
 * task->throttled misses a third of the throttled switch-outs
 * (host-steals.md section 1). Without the field: never throttled.
 */
static __always_inline bool st_task_throttled(struct task_struct *t)
{
	if (!bpf_core_field_exists(struct cfs_rq, throttle_count) ||
	    !bpf_core_field_exists(struct sched_entity, cfs_rq))
		return false;
	/* t is a BTF pointer (sched_switch's prev): direct loads, no helper calls. */
	struct cfs_rq *cfs_rq = t->se.cfs_rq;

	return cfs_rq && cfs_rq->throttle_count > 0;
}

#endif /* STEPTRACE_CORE_FIXES_BPF_H */
