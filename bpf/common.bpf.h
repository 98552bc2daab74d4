/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * common.bpf.h - maps, configuration, target filter and record emission
 * shared by every collector. Each .bpf.c is compiled on its own and
 * `bpftool gen object` links them into one object; everything here is
 * declared __weak so the linker merges the copies into one map/variable.
 */
#ifndef STEPTRACE_COMMON_BPF_H
#define STEPTRACE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "steptrace_abi.h"
#include "arch_x86.h" /* syscall numbers and the saved user registers */

/* ---- configuration (rodata, written before load) ---- */
const volatile struct st_config st_cfg __weak = {};

/*
 * Which tier does the accelerator ioctls: 1 = the syscall hook
 * (sys_enter/sys_exit, filtered to device files), 0 = the kprobe on the
 * driver's ioctl handler. Not rodata: the loader falls back to the syscall
 * hook at run time if the kprobe cannot be attached.
 */
__u32 st_accel_in_syscalls __weak = 1;

/*
 * The daemon's degradation ladder, flipped between analysis windows without
 * reloading (so not rodata). st_detail = 0: the sched switch/wakeup, net and
 * block programs keep their bookkeeping (task state, socket owners, requests
 * in flight) but reserve no record. st_aggregate = 1: they add into
 * st_proc_agg_map instead. Sessions never touch them: detail on, no aggregation.
 */
__u32 st_detail __weak = 1;
__u32 st_aggregate __weak = 0;

/*
 * Set by the consumer before it sleeps past its drain interval (nothing came
 * for a while). The next record wakes it (BPF_RB_FORCE_WAKEUP) and clears the
 * flag, so an idle session wakes rarely and a busy one still drains on its
 * timer with no per-record wake-ups. A race between two CPUs costs at most a
 * second wake-up.
 */
__u32 st_consumer_idle __weak = 0;

/*
 * Set when a record found the ring past st_cfg.ring_wake_bytes and woke the
 * consumer; cleared by the consumer once it has drained. One wake-up per
 * drain at most, whatever the rate.
 */
__u32 st_consumer_woken __weak = 0;

/*
 * Armed by the consumer after each drain when it looks for the runtime
 * library in new program images: a target's exec then wakes it at once
 * (one wake-up, then disarmed until the next drain), so the new image's maps
 * are read within milliseconds of the exec instead of a drain interval later,
 * before the job's first device call. Never armed under --all (an exec storm
 * would wake it per drain).
 */
__u32 st_exec_wake __weak = 0;

/* ---- maps ---- */

/* All records. Sized by userspace before load (bpf_map__set_max_entries). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} st_events SEC(".maps") __weak;

/* Per-CPU emitted/dropped counters, one slot per kind. Never silent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct st_stats);
} st_stats_map SEC(".maps") __weak;

/* Per-CPU losses (struct st_losses): state a collector could not keep. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct st_losses);
} st_loss_map SEC(".maps") __weak;

/* Traced tgids: seeded by userspace, grown at fork, pruned at group exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ST_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} st_targets SEC(".maps") __weak;

/* Device files named with --accel-dev / --rdma-dev, matched on (s_dev, ino). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ST_MAX_ACCEL_DEVS);
	__type(key, struct st_accel_dev_key);
	__type(value, __u32);
} st_accel_devs SEC(".maps") __weak;

/*
 * Per-thread state in task-local storage: measured cheaper than a hash map
 * on the hot paths (+254 vs +542 ns per sched_switch on a 2 vCPU VM).
 */
struct st_task_state {
	/* The last timed syscall's entry (accel_ioctl.bpf.c, st_sys_stamped; 0:
	 * none yet) and its number, -1 once a device call has exited. Whether
	 * the thread is still in it: st_task_syscall(). */
	__u64 sys_enter_ts;
	__s32 sys_nr;
	__u32 yields;        /* unused (yields are counted at the switch-out); kept for the layout */
	/* accelerator ioctl in flight */
	__u64 accel_bytes;
	__u32 accel_cmd;
	__u32 accel_dev_index;
	__u32 accel_flags;
	__s32 accel_fd;
	__u8 accel_pending;
	__u8 rdma_pending;   /* uverbs call in flight (accel_ioctl.bpf.c) */
	__u8 pad_[6];
	/* schedstat run_delay (cumulative) when the thread last left a CPU,
	 * | 1 so that 0 means never seen: the next switch-out reports the
	 * difference as the queue wait before its slice (sched.bpf.c). */
	__u64 run_delay_at_out;
	/* kprobe tiers: what the entry probe saw, for the return probe */
	__u64 accel_enter_ts;  /* ncdev_ioctl entry */
	__u64 net_sk;          /* tcp_sendmsg/tcp_recvmsg in progress: the socket */
	__u64 net_enter_ts;
	/* uverbs call in flight: what the entry decoded, for the exit */
	__u64 rdma_bytes;
	__u16 rdma_object;
	__u16 rdma_method;
	__u32 rdma_write_cmd;
	__u32 rdma_dev_index;
	__u32 rdma_flags;
	/* se.sum_exec_runtime when the thread last left a CPU, | 1 as above:
	 * the on-CPU time of each slice for st_proc_agg (sched.bpf.c). */
	__u64 exec_ns_at_out;
	/* ST_SUB_STEAL (steal.bpf.c): interrupt time taken while the thread was
	 * current in the slice now on the CPU, sent at its switch-out; a reclaim
	 * pass in progress (begin time, enum st_steal_kind). */
	__u64 irq_ns;
	__u64 softirq_ns;
	__u32 irq_count;
	__u32 softirq_count;
	__u32 softirq_vecs;
	__u64 irq_since;   /* when the first handler of the unsent time began */
	__u32 reclaim_kind;
	__u64 reclaim_start;
	/* The device file this thread last used (accel_ioctl.bpf.c,
	 * st_devfile_match): its inode's address and number, and what it is
	 * (enum st_devfile; 0 = none kept). */
	__u64 devfile_inode;
	__u64 devfile_ino;
	__u32 devfile_index;
	__u32 devfile_flags;
	__u32 devfile_class;
};

/*
 * Per CPU: the tid of the target thread now on this CPU (0: none), kept by
 * the sched collector at every switch that involves a target, so interrupt
 * handlers reject non-target time with one per-CPU lookup and no task
 * lookup. The interrupt state: when the hardirq / softirq now running began
 * (0: none, or not in a target's time), and the hardirq time inside the
 * running softirq (counted as IRQ, not SOFTIRQ).
 */
struct st_cpu_state {
	__u32 cur_target_tid;
	__u32 softirq_vec;
	__u64 hardirq_start;
	__u64 softirq_start;
	__u64 hardirq_in_softirq;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct st_cpu_state);
} st_cpu SEC(".maps") __weak;

static __always_inline struct st_cpu_state *st_cpu_state(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&st_cpu, &zero);
}

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct st_task_state);
} st_task SEC(".maps") __weak;

/* Per-process counters while st_aggregate is on (struct st_proc_agg). Sized by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, ST_MAX_AGG_PROCS);
	__type(key, __u32);
	__type(value, struct st_proc_agg);
} st_proc_agg_map SEC(".maps") __weak;

/* ---- target filter ---- */

/*
 * The target set as one bit per tgid, beside st_targets: every hook asks
 * "is this a target?" (twice per sched_switch), and a hash lookup cost
 * 65-80 ns of it on this VM (bpf_stats: st_sys_exit 185 -> 118 ns per run
 * with the lookup replaced), a load from this array a few. st_targets stays
 * the registry (its size bounds the set, a full map is counted at fork);
 * a tgid's bit is set only after its st_targets entry exists and cleared
 * before the entry goes, by atomic or/and here and in userspace (the .bss
 * is mmapped there), so concurrent forks and exits of tgids that share a
 * word lose no bit. tgids are < PID_MAX_LIMIT (2^22 on 64-bit): 512 KiB.
 */
__u64 st_target_bits[ST_TARGET_BITS_WORDS] __weak;

static __always_inline void st_target_mark(__u32 tgid)
{
	__sync_fetch_and_or(&st_target_bits[(tgid >> 6) & (ST_TARGET_BITS_WORDS - 1)], 1ull << (tgid & 63));
}

static __always_inline void st_target_unmark(__u32 tgid)
{
	__sync_fetch_and_and(&st_target_bits[(tgid >> 6) & (ST_TARGET_BITS_WORDS - 1)], ~(1ull << (tgid & 63)));
}

static __always_inline bool st_tgid_is_target(__u32 tgid)
{
	if (tgid == 0 || tgid == st_cfg.self_tgid)
		return false;
	if (st_cfg.filter_mode == ST_FILTER_ALL)
		return true;
	return (st_target_bits[(tgid >> 6) & (ST_TARGET_BITS_WORDS - 1)] >> (tgid & 63)) & 1;
}

static __always_inline __u64 st_task_cgroup_id(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* Is this task traced? Cheapest checks first: most events are not ours.
 * `t` is a BTF pointer (a tp_btf argument or bpf_get_current_task_btf()):
 * a direct load, not a bpf_probe_read_kernel call. */
static __always_inline bool st_task_is_target(struct task_struct *t)
{
	__u32 tgid = t->tgid;

	if (st_tgid_is_target(tgid))
		return true;
	if (st_cfg.filter_mode == ST_FILTER_CGROUP && tgid != 0 && tgid != st_cfg.self_tgid)
		return st_task_cgroup_id(t) == st_cfg.cgroup_id;
	return false;
}

/* The current task, whose tgid the caller already has (one helper call fewer). */
static __always_inline bool st_current_tgid_is_target(__u32 tgid)
{
	if (st_tgid_is_target(tgid))
		return true;
	if (st_cfg.filter_mode == ST_FILTER_CGROUP && tgid != 0 && tgid != st_cfg.self_tgid)
		return bpf_get_current_cgroup_id() == st_cfg.cgroup_id;
	return false;
}

static __always_inline bool st_current_is_target(void)
{
	return st_current_tgid_is_target(bpf_get_current_pid_tgid() >> 32);
}

/*
 * The syscall a task is inside (-1: none), and its first argument, from the
 * user registers the kernel saved at the task's last entry from user space
 * (what /proc/PID/syscall reads). Read where a record wants it (a switch-out,
 * a wakeup) instead of stamped at every syscall entry and exit: the raw
 * syscall hooks run for every syscall of a target, and kept the thread's
 * storage up to date at a cost of ~130 ns per syscall over the empty hook
 * (B13, the ping-pong). Also right for a thread that was already blocked
 * when tracing began. `t` is a BTF pointer; a kernel thread has no user
 * registers. A task blocked in a page fault taken in user mode has its
 * error code in orig_ax and the user's rax in ax (ST_SYSCALL_RET): -1.
 */
#define ST_PF_KTHREAD 0x00200000 /* include/linux/sched.h */
static __always_inline __s32 st_task_syscall(struct task_struct *t, __u64 *arg0)
{
	struct pt_regs *regs;

	if (t->flags & ST_PF_KTHREAD)
		return -1;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs || (long)ST_SYSCALL_RET(regs) != -ST_ENOSYS)
		return -1;
	if (arg0)
		*arg0 = ST_SYSCALL_ARG0(regs);
	return (__s32)ST_SYSCALL_NR(regs);
}

/* ---- emission ---- */

static __always_inline struct st_stats *st_stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&st_stats_map, &zero);
}

/* Reserve a record and fill the header for the current task; counts drops. */
static __always_inline void *st_reserve_for(__u32 size, __u32 kind, __u32 pid, __u32 tid, __u64 ts)
{
	struct st_stats *s = st_stats();
	struct st_event_header *h = bpf_ringbuf_reserve(&st_events, size, 0);

	if (kind >= ST_EV_KIND_MAX)
		return NULL;
	if (!h) {
		if (s)
			s->dropped[kind]++;
		return NULL;
	}
	if (s)
		s->emitted[kind]++;
	h->size = size;
	h->kind = kind;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = ts;
	h->pid = pid;
	h->tid = tid;
	return h;
}

static __always_inline void *st_reserve(__u32 size, __u32 kind)
{
	__u64 id = bpf_get_current_pid_tgid();

	return st_reserve_for(size, kind, id >> 32, (__u32)id, bpf_ktime_get_ns());
}

/*
 * Never wake the consumer per record: a wakeup per sched_switch made a
 * synthetic training loop 2.4x slower here. Userspace drains on a timer,
 * and is woken early only after it went idle, or when the ring fills past
 * st_cfg.ring_wake_bytes (once per drain).
 */
static __always_inline void st_submit(void *rec)
{
	if (st_consumer_idle) {
		st_consumer_idle = 0;
		bpf_ringbuf_submit(rec, BPF_RB_FORCE_WAKEUP);
		return;
	}
	if (st_cfg.ring_wake_bytes && !st_consumer_woken &&
	    bpf_ringbuf_query(&st_events, BPF_RB_AVAIL_DATA) > st_cfg.ring_wake_bytes) {
		st_consumer_woken = 1;
		bpf_ringbuf_submit(rec, BPF_RB_FORCE_WAKEUP);
		return;
	}
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
}

static __always_inline struct st_losses *st_losses(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&st_loss_map, &zero);
}

static __always_inline void st_count_loss(__u32 kind)
{
	struct st_losses *l = st_losses();

	if (l && kind < ST_LOSS_KIND_MAX)
		l->lost[kind]++;
}

static __always_inline void st_count_ledger(__u32 slot)
{
	struct st_losses *l = st_losses();

	if (l && slot < ST_LEDGER_MAX)
		l->ledger[slot]++;
}

/*
 * This CPU's counters of process `tgid`, created on first use; NULL if the
 * map refuses. An LRU map evicts the least recently used process to make
 * room, silently: new keys are counted (ST_LEDGER_AGG_ADDED) and userspace
 * derives the evictions from added - deleted by it - still present. What it
 * cannot know is which process lost which counts.
 */
static __always_inline struct st_proc_agg *st_proc_agg_get(__u32 tgid)
{
	struct st_proc_agg *a = bpf_map_lookup_elem(&st_proc_agg_map, &tgid);
	struct st_proc_agg zero = {};

	if (a)
		return a;
	/* -EEXIST: another CPU created it first (not counted twice). */
	if (bpf_map_update_elem(&st_proc_agg_map, &tgid, &zero, BPF_NOEXIST) == 0)
		st_count_ledger(ST_LEDGER_AGG_ADDED);
	a = bpf_map_lookup_elem(&st_proc_agg_map, &tgid);
	if (!a)
		st_count_loss(ST_LOSS_AGG_EVICTED);
	return a;
}

static __always_inline struct st_task_state *st_task_state_get(struct task_struct *t, bool create)
{
	return bpf_task_storage_get(&st_task, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

#endif /* STEPTRACE_COMMON_BPF_H */
