// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * sched.bpf.c - on-CPU / runnable / blocked transitions of target threads,
 * who woke whom, and the life cycle of target tasks (fork, exec, rename, exit).
 *
 * Everything here comes from scheduler tracepoints that fire anyway. A
 * yield is a switch-out that left prev runnable from inside sched_yield()
 * (its saved registers): the calls that gave the CPU away. Those that found
 * nothing else to run are not seen: counting them took a program on every
 * syscall of every task on the host (the raw sys_enter hook), and a
 * busy-polling runtime makes hundreds of thousands a second (B7: empty
 * programs on those hooks alone slowed its steps by 2-3 %). A switch with
 * prev runnable and no preempt flag is no proof of a yield: a tick's
 * preemption taken on the way back to user space looks the same.
 */
#include "common.bpf.h"
#include "core_fixes.bpf.h"
#include "arch_x86.h" /* ST_NR_SCHED_YIELD */

/*
 * The interrupt time steal.bpf.c added up while prev was current, one record
 * per kind with any, before prev's switch record (same timestamp order: the
 * record's ts is taken first). Sent once it is worth a record: 50 us of
 * handler time, or 20 ms since its first handler. Timer ticks take a few
 * microseconds each, and a busy-polling runtime leaves the CPU thousands of
 * times a second: one record per slice with a tick doubled the ring's load
 * (a 3-minute CI run dropped 1.3 % of its records). Heavy interrupt load
 * still goes out slice by slice. The record covers [irq_since, now), and
 * userspace spreads it over that span.
 */
#define ST_STEAL_FLUSH_NS 50000ull
#define ST_STEAL_FLUSH_AGE_NS 20000000ull
static __always_inline void st_emit_irq_slice(struct task_struct *prev, struct st_task_state *ts, bool send)
{
	struct st_host_steal *e;
	__u64 now;

	if (!ts->irq_ns && !ts->softirq_ns)
		return;
	if (!send)
		goto reset;
	now = bpf_ktime_get_ns();
	if (ts->irq_ns + ts->softirq_ns < ST_STEAL_FLUSH_NS && ts->irq_since && now - ts->irq_since < ST_STEAL_FLUSH_AGE_NS)
		return;
	if (ts->irq_ns) {
		e = st_reserve_for(sizeof(*e), ST_EV_HOST_STEAL, prev->tgid, prev->pid, now);
		if (e) {
			e->start_ns = ts->irq_since;
			e->ns = ts->irq_ns;
			e->kind = ST_STEAL_IRQ;
			e->count = ts->irq_count;
			e->detail = 0;
			e->pad_ = 0;
			st_submit(e);
		}
	}
	if (ts->softirq_ns) {
		e = st_reserve_for(sizeof(*e), ST_EV_HOST_STEAL, prev->tgid, prev->pid, now);
		if (e) {
			e->start_ns = ts->irq_since;
			e->ns = ts->softirq_ns;
			e->kind = ST_STEAL_SOFTIRQ;
			e->count = ts->softirq_count;
			e->detail = ts->softirq_vecs;
			e->pad_ = 0;
			st_submit(e);
		}
	}
reset:
	ts->irq_ns = 0;
	ts->softirq_ns = 0;
	ts->irq_count = 0;
	ts->softirq_count = 0;
	ts->softirq_vecs = 0;
	ts->irq_since = 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(st_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	bool prev_t, next_t;
	struct st_sched_switch *e;
	struct st_task_state *ts;
	__u32 yields = 0;
	__s32 sys_nr = -1;
	__u64 queue_ns = ST_QUEUE_UNKNOWN, run_delay, exec_ns, oncpu_ns = 0;
	struct st_proc_agg *agg;

	if (!(st_cfg.enabled & ST_SUB_SCHED))
		return 0;
	prev_t = st_task_is_target(prev);
	next_t = st_task_is_target(next);
	if (!prev_t && !next_t)
		return 0;
	/* Whose time the interrupts on this CPU take from now on (steal.bpf.c).
	 * A switch between two other tasks leaves it 0, as the last switch that
	 * involved a target set it; the handlers also compare it with the tid of
	 * current, so a stale value (a target that died on this CPU) costs
	 * nothing but that compare. */
	if (st_cfg.enabled & ST_SUB_STEAL) {
		struct st_cpu_state *c = st_cpu_state();

		if (c)
			c->cur_target_tid = next_t ? next->pid : 0;
	}

	if (prev_t) {
		/* What it blocked in (read only where the record uses it, a
		 * switch-out that did not leave prev runnable). */
		if (prev_state != 0)
			sys_nr = st_task_syscall(prev, NULL);
		ts = st_task_state_get(prev, true);
		if (prev_state == 0 && !preempt && st_task_syscall(prev, NULL) == ST_NR_SCHED_YIELD)
			yields = 1;
		if (ts) {
			/*
			 * sched_info_arrive() added the wait that ended when this
			 * slice began (and sched_info_dequeue() any part of it before
			 * a migration) to run_delay; nothing else changes it while
			 * the task runs. So the growth since the last switch-out is
			 * exactly that wait, as schedstat and delayacct count it.
			 */
			if (st_has_sched_info()) {
				run_delay = prev->sched_info.run_delay;
				if (ts->run_delay_at_out && run_delay >= (ts->run_delay_at_out & ~1ull))
					queue_ns = run_delay - (ts->run_delay_at_out & ~1ull);
				ts->run_delay_at_out = run_delay | 1;
			}
			/* update_curr() ran in put_prev_task before this tracepoint:
			 * sum_exec_runtime includes the slice that just ended. */
			exec_ns = prev->se.sum_exec_runtime;
			if (ts->exec_ns_at_out && exec_ns >= (ts->exec_ns_at_out & ~1ull))
				oncpu_ns = exec_ns - (ts->exec_ns_at_out & ~1ull);
			ts->exec_ns_at_out = exec_ns | 1;
			if (st_cfg.enabled & ST_SUB_STEAL)
				st_emit_irq_slice(prev, ts, st_detail);
		}
		if (st_aggregate) {
			agg = st_proc_agg_get(prev->tgid);
			if (agg) {
				agg->oncpu_ns += oncpu_ns;
				if (queue_ns != ST_QUEUE_UNKNOWN)
					agg->runq_wait_ns += queue_ns;
				agg->switches++;
				/* The kernel's nivcsw: preempted, or left the CPU runnable (yield). */
				if (preempt || prev_state == 0)
					agg->involuntary++;
			}
		}
	}
	/* Detail off: the bookkeeping above is done, the record is not. */
	if (!st_detail)
		return 0;
	e = st_reserve_for(sizeof(*e), ST_EV_SCHED_SWITCH, prev->tgid, prev->pid, bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->next_pid = next->tgid;
	e->next_tid = next->pid;
	e->prev_state = prev_state;
	e->flags = (preempt ? ST_SWITCH_PREEMPT : 0) | (prev_t ? ST_SWITCH_PREV_TARGET : 0) |
		   (next_t ? ST_SWITCH_NEXT_TARGET : 0);
	/* Left runnable: preempted, or its cgroup ran out of quota. */
	if (prev_t && (preempt || prev_state == 0) && st_task_throttled(prev))
		e->flags |= ST_SWITCH_THROTTLED;
	e->prev_yields = yields;
	e->prev_sys_nr = sys_nr;
	e->prev_queue_ns = queue_ns;
	st_submit(e);
	return 0;
}

static __always_inline int st_emit_wakeup(struct task_struct *p, __u32 flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct st_sched_wakeup *e;

	if (!(st_cfg.enabled & ST_SUB_SCHED) || !st_detail)
		return 0;
	if (!st_task_is_target(p))
		return 0;
	e = st_reserve_for(sizeof(*e), ST_EV_SCHED_WAKEUP, p->tgid, p->pid, bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->waker_pid = cur->tgid;
	e->waker_tid = cur->pid;
	e->waker_sys_nr = -1;
	if (st_task_is_target(cur)) {
		flags |= ST_WAKE_WAKER_TARGET;
		e->waker_sys_nr = st_task_syscall(cur, NULL);
	}
	/* What the wakee was blocked in tells what it waited for (pipe read, recv, futex...). */
	e->wakee_sys_arg0 = 0;
	e->wakee_sys_nr = st_task_syscall(p, &e->wakee_sys_arg0);
	e->flags = flags;
	e->target_cpu = p->wake_cpu;
	bpf_get_current_comm(e->waker_comm, sizeof(e->waker_comm));
	st_submit(e);
	return 0;
}

/*
 * sched_waking, not sched_wakeup: sched_waking fires in the waker's context
 * (try_to_wake_up), while sched_wakeup of a wakeup queued to another CPU
 * (ttwu_queue_wakelist) fires later on the wakee's CPU where `current` is
 * whoever runs there, so the waker would be misattributed. Measured on the
 * 6.1/6.12 qemu guests: the sleeper/waker test failed with sched_wakeup.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(st_sched_wakeup, struct task_struct *p)
{
	return st_emit_wakeup(p, 0);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(st_sched_wakeup_new, struct task_struct *p)
{
	return st_emit_wakeup(p, ST_WAKE_NEW);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(st_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	struct st_task_new *e;
	__u32 child_tgid = child->tgid;
	__u8 one = 1;

	if (!st_task_is_target(parent))
		return 0;
	/* Follow the job's process tree: a new process of a target is a target.
	 * A full map (-E2BIG) loses the child and all it will fork: counted. */
	if (st_cfg.filter_mode != ST_FILTER_ALL && st_cfg.follow_forks && child_tgid == child->pid) {
		if (bpf_map_update_elem(&st_targets, &child_tgid, &one, BPF_ANY))
			st_count_loss(ST_LOSS_FORK_TARGET);
		else
			st_target_mark(child_tgid);
	}

	e = st_reserve_for(sizeof(*e), ST_EV_TASK_NEW, parent->tgid, parent->pid, bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->child_pid = child_tgid;
	e->child_tid = child->pid;
	e->flags = child_tgid == parent->tgid ? ST_TASK_IS_THREAD : 0;
	e->pad_ = 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), child->comm);
	st_submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(st_sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct st_task_comm *e;

	if (!st_task_is_target(p))
		return 0;
	e = st_reserve(sizeof(*e), ST_EV_TASK_EXEC);
	if (!e)
		return 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (st_exec_wake) {
		st_exec_wake = 0;
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
		return 0;
	}
	st_submit(e);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(st_task_rename, struct task_struct *task, const char *comm)
{
	struct st_task_comm *e;

	if (!st_task_is_target(task))
		return 0;
	e = st_reserve_for(sizeof(*e), ST_EV_TASK_COMM, task->tgid, task->pid, bpf_ktime_get_ns());
	if (!e)
		return 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
	st_submit(e);
	return 0;
}

/*
 * sched_process_exit gained a group_dead argument in newer kernels; we read
 * signal->live instead (already decremented by do_exit before the tracepoint),
 * which works on every kernel we target.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(st_sched_process_exit, struct task_struct *p)
{
	struct st_task_exit *e;
	__u32 tgid = p->tgid;
	bool group_dead = BPF_CORE_READ(p, signal, live.counter) == 0;

	if (!st_task_is_target(p))
		return 0;
	e = st_reserve(sizeof(*e), ST_EV_TASK_EXIT);
	if (e) {
		e->exit_code = BPF_CORE_READ(p, exit_code);
		e->flags = group_dead ? ST_EXIT_GROUP_DEAD : 0;
		e->yields = 0; /* yields are counted at the switch-out (prev_yields) */
		e->pad_ = 0;
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		st_submit(e);
	}
	/* Forget the tgid so a reused pid is not traced by mistake. */
	if (group_dead && st_cfg.filter_mode != ST_FILTER_ALL) {
		st_target_unmark(tgid);
		bpf_map_delete_elem(&st_targets, &tgid);
	}
	return 0;
}
