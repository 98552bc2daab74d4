/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * steptrace_abi.h - THE record format between the BPF collectors and the
 * userspace aggregator, and the configuration written to rodata before load.
 *
 * Rules:
 *  - fixed-width types only; every struct's size is pinned by a static assert;
 *  - every record starts with struct st_event_header;
 *  - kinds are append-only: never renumber, never reuse a retired value;
 *  - a layout change bumps ST_ABI_VERSION (the decoder and capture files check it).
 */
#ifndef STEPTRACE_ABI_H
#define STEPTRACE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define ST_ABI_VERSION 8
/* Oldest record layout this build still reads (capture files). v1 -> v2:
 * st_sched_switch grew prev_queue_ns; v1 switch records decode with it unknown.
 * v2 -> v3: kind ST_EV_RDMA_VERB added (no existing layout changed).
 * v3 -> v4: kind ST_EV_USER_NOTE added (written by userspace, never by BPF).
 * v5 -> v6: kind ST_EV_CPU_SAMPLE added (no existing layout changed).
 * v6 -> v7: st_net_xfer grew seq_end and flags; v6 records decode with no
 * stream position (ST_NET_XFER_V6_SIZE).
 * v7 -> v8: st_net_xfer flag ST_NET_ARRIVAL (a segment's arrival, not a
 * call; no layout changed): a v7 reader would take them for receive calls. */
#define ST_ABI_MIN_READABLE 1
#define ST_COMM_LEN 16
#define ST_MAX_TARGETS 65536   /* traced tgids (follows fork) */
/* Words of the target bitmap (st_target_bits): one bit per tgid below
 * PID_MAX_LIMIT, 2^22 on 64-bit kernels. */
#define ST_TARGET_BITS_WORDS (1u << 16)
#define ST_MAX_ACCEL_DEVS 64   /* explicit --accel-dev files */
#define ST_MAX_INFLIGHT_RQ 16384
#define ST_MAX_SOCKS 16384

/* Event kinds. Append only. */
enum st_event_kind {
	ST_EV_NONE = 0,
	ST_EV_SCHED_SWITCH = 1,
	ST_EV_SCHED_WAKEUP = 2,
	ST_EV_TASK_NEW = 3,
	ST_EV_TASK_EXEC = 4,
	ST_EV_TASK_EXIT = 5,
	ST_EV_TASK_COMM = 6,
	ST_EV_BLOCK_RQ = 7,
	ST_EV_NET_XFER = 8,
	ST_EV_TCP_RETRANSMIT = 9,
	ST_EV_TCP_STATE = 10,
	ST_EV_ACCEL_IOCTL = 11,
	ST_EV_UPROBE = 12,
	ST_EV_ACCEL_TP = 13,   /* a neuron:* driver tracepoint (struct st_accel_tp) */
	ST_EV_RDMA_VERB = 14,  /* a uverbs call: the EFA control path (struct st_rdma_verb) */
	ST_EV_USER_NOTE = 15,  /* userspace's own facts (struct st_user_note): identities, probes */
	ST_EV_HOST_STEAL = 16, /* time the host took from a target thread (struct st_host_steal) */
	ST_EV_CPU_SAMPLE = 17, /* an on-CPU stack sample of a target thread (struct st_cpu_sample) */
	ST_EV_KIND_MAX = 18, /* one past the last kind; sizes the stats arrays */
};

/* Subsystems that can be enabled in st_config.enabled. */
enum st_subsystem {
	ST_SUB_SCHED = 1u << 0,
	ST_SUB_BLOCK = 1u << 1,
	ST_SUB_NET = 1u << 2,
	ST_SUB_ACCEL = 1u << 3,
	ST_SUB_UPROBE = 1u << 4,
	ST_SUB_STEAL = 1u << 5,  /* interrupts and memory reclaim in target threads' time */
	ST_SUB_SAMPLE = 1u << 6, /* on-CPU stack samples (perf events; rate set by userspace) */
};

enum st_filter_mode {
	ST_FILTER_ALL = 0,    /* whole host (minus steptrace itself) */
	ST_FILTER_TGID = 1,   /* tgids in st_targets; children added at fork */
	ST_FILTER_CGROUP = 2, /* cgroup v2 id, plus tgids in st_targets */
};

/*
 * Configuration, written to .rodata before load so the verifier prunes the
 * arms that are off (a disabled subsystem costs nothing per event).
 */
struct st_config {
	__u32 filter_mode;    /* enum st_filter_mode */
	__u32 follow_forks;   /* add children of targets to st_targets */
	__u64 cgroup_id;      /* ST_FILTER_CGROUP */
	__u32 enabled;        /* enum st_subsystem bits */
	__u32 self_tgid;      /* never trace steptrace's own threads */
	__u32 neuron_major;   /* char major of "neuron" in /proc/devices, 0 = none */
	__u32 n_accel_devs;   /* entries in st_accel_devs; 0 skips the lookup */
	__u32 uverbs_major;   /* char major of "infiniband_verbs", 0 = none */
	__u32 rdma_verbs;     /* decode uverbs calls (EFA control path) */
	/* Wake the consumer once the ring holds more unread bytes than this
	 * (0: never): it drains on a timer, and a burst that would fill a ring
	 * sized to stay in cache must not wait for the timer. */
	__u32 ring_wake_bytes;
	/* Socket owners in the sockets' own storage (BPF_MAP_TYPE_SK_STORAGE),
	 * not the st_socks LRU: set when every net program is a tp_btf one
	 * (bpf/net.bpf.c). */
	__u32 socks_in_sk;
};

/* Common header of every record. ts_ns is CLOCK_MONOTONIC (bpf_ktime_get_ns). */
struct st_event_header {
	__u16 size;  /* whole record, header included */
	__u16 kind;  /* enum st_event_kind */
	__u32 cpu;
	__u64 ts_ns;
	__u32 pid;   /* tgid of the subject task */
	__u32 tid;   /* tid of the subject task */
};

/* prev (header pid/tid) leaves the CPU, next enters. */
#define ST_SWITCH_PREEMPT (1u << 0)     /* involuntary: prev stays runnable */
#define ST_SWITCH_PREV_TARGET (1u << 1)
#define ST_SWITCH_NEXT_TARGET (1u << 2)
/* prev left the CPU runnable because its cgroup (or an ancestor) ran out of
 * CPU quota (cpu.max / cfs_quota_us): its cfs_rq's throttle_count was > 0.
 * Set by the sched collector where the kernel has CFS bandwidth control. */
#define ST_SWITCH_THROTTLED (1u << 3)
struct st_sched_switch {
	struct st_event_header hdr;
	__u32 next_pid;
	__u32 next_tid;
	__u32 prev_state;   /* TASK_* bits: 0 runnable, 1 S, 2 D, ... */
	__u32 flags;        /* ST_SWITCH_* */
	__u32 prev_yields;  /* 1: prev gave the CPU away in sched_yield(); older versions counted every sched_yield() of the slice */
	__s32 prev_sys_nr;  /* syscall prev was in when it left the CPU, -1 none/unknown */
	/* How long prev waited on a runqueue before the slice that just ended
	 * (the kernel's schedstat run_delay for that arrival, migrations
	 * included), ST_QUEUE_UNKNOWN when not known (first slice seen, kernel
	 * without CONFIG_SCHED_INFO). Time between a wake-up and the enqueue
	 * (wake-up IPI, idle exit) is not in it: that is not contention. */
	__u64 prev_queue_ns;
};
#define ST_QUEUE_UNKNOWN (~0ull)
#define ST_SCHED_SWITCH_V1_SIZE 48

/* header pid/tid = the woken task (wakee). */
#define ST_WAKE_NEW (1u << 0)          /* sched_wakeup_new: first run of a new task */
#define ST_WAKE_WAKER_TARGET (1u << 1)
struct st_sched_wakeup {
	struct st_event_header hdr;
	__u32 waker_pid;
	__u32 waker_tid;
	__s32 waker_sys_nr;  /* syscall the waker was in (target wakers only), -1 */
	__s32 wakee_sys_nr;  /* syscall the wakee was blocked in, -1 unknown */
	__u64 wakee_sys_arg0; /* its first argument (usually an fd) */
	__u32 flags;         /* ST_WAKE_* */
	__u32 target_cpu;
	char waker_comm[ST_COMM_LEN];
};

/* header = parent; a new thread or process. */
#define ST_TASK_IS_THREAD (1u << 0)
struct st_task_new {
	struct st_event_header hdr;
	__u32 child_pid;
	__u32 child_tid;
	__u32 flags;
	__u32 pad_;
	char comm[ST_COMM_LEN];
};

/* header = the task; comm after exec or a rename (prctl PR_SET_NAME). */
struct st_task_comm {
	struct st_event_header hdr;
	char comm[ST_COMM_LEN];
};

#define ST_EXIT_GROUP_DEAD (1u << 0)
struct st_task_exit {
	struct st_event_header hdr;
	__s32 exit_code;
	__u32 flags;
	__u32 yields;       /* 0 (yields are in the switch-outs); older captures: sched_yield() calls in the final slice */
	__u32 pad_;
	char comm[ST_COMM_LEN];
};

/* header pid/tid = the task that issued the request; ts_ns = completion. */
#define ST_RQ_WRITE (1u << 0)
#define ST_RQ_SYNC (1u << 1)
#define ST_RQ_FLUSH (1u << 2)
struct st_block_rq {
	struct st_event_header hdr;
	__u64 insert_ts;  /* 0 when the request bypassed the scheduler */
	__u64 issue_ts;
	__u64 sector;
	__u32 dev;        /* kernel dev_t: major << 20 | minor */
	__u32 bytes;
	__u32 op;         /* REQ_OP_* */
	__u32 flags;      /* ST_RQ_* */
	__s32 error;
	__u32 pad_;
};

/* Socket identity: the 4-tuple in network byte order, IPv4 as v4-mapped IPv6. */
struct st_sock_tuple {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;  /* host order */
	__u16 dport;  /* host order */
	__u16 family; /* AF_INET / AF_INET6 */
	__u16 pad_;
};

#define ST_NET_SEND 0
#define ST_NET_RECV 1
/* header = the task; ts_ns = end of the send/recv. */
struct st_net_xfer {
	struct st_event_header hdr;
	__u64 sock_id;     /* stable while the socket lives */
	__u64 dur_ns;      /* syscall entry -> now; 0 when unknown */
	struct st_sock_tuple tuple;
	__s32 bytes;
	__u32 dir;         /* ST_NET_SEND / ST_NET_RECV */
	/*
	 * The call's place in the byte stream (ST_NET_SEQ_VALID): TCP's write_seq
	 * after a send, copied_seq after a receive, so the call moved the bytes
	 * [seq_end - bytes, seq_end) (mod 2^32). The same bytes sent on one host
	 * and received on another bound the two hosts' clock offset
	 * (multinode/stream_match.h).
	 */
	__u32 seq_end;
	__u32 flags;       /* ST_NET_SEQ_VALID, ST_NET_ARRIVAL */
};
#define ST_NET_SEQ_VALID 1u
/* Not a call: a segment with these bytes arrived at the socket (dir RECV,
 * dur_ns 0, tid 0, pid the socket's owner; at most one a millisecond per
 * socket); only the clock bound uses it. */
#define ST_NET_ARRIVAL 2u
#define ST_NET_XFER_V6_SIZE 88

struct st_tcp_retransmit {
	struct st_event_header hdr;
	__u64 sock_id;
	struct st_sock_tuple tuple;
	__u32 state;
	__u32 pad_;
};

struct st_tcp_state {
	struct st_event_header hdr;
	__u64 sock_id;
	struct st_sock_tuple tuple;
	__u32 old_state;
	__u32 new_state;
};

/* header = the calling task; ts_ns = ioctl return. */
#define ST_ACCEL_H2D (1u << 0)   /* copy toward the device */
#define ST_ACCEL_D2H (1u << 1)
#define ST_ACCEL_BY_MAJOR (1u << 2) /* matched by the neuron char major */
#define ST_ACCEL_VIA_KPROBE (1u << 3) /* seen by the kprobe on the driver's ioctl handler */
struct st_accel_ioctl {
	struct st_event_header hdr;
	__u64 enter_ts;
	__u64 bytes;      /* transfer size for copy ioctls, descriptor bytes for descriptor writes */
	__s64 ret;
	__u32 cmd;        /* full 32-bit command */
	__s32 fd;
	__u32 dev_index;  /* minor for neuron devices, --accel-dev position otherwise */
	__u32 flags;      /* ST_ACCEL_* */
};

/*
 * The accelerator driver's own tracepoints (classic tracepoints of the
 * out-of-tree neuron module, attached only when present and when their
 * format files match the layout accel_ioctl.bpf.c reads).
 * header = the task in whose context the driver fired it.
 */
enum st_accel_tp_id {
	ST_NTP_DMA_QUEUE_COPY_START = 1, /* value = tx_desc_count, aux = rx_desc_count */
	ST_NTP_DMA_ACK_COMPLETED = 2,    /* value = count */
	ST_NTP_MEM_COPYIN = 3,           /* value = size (bytes) */
	ST_NTP_MEM_COPYOUT = 4,          /* value = size (bytes) */
};
struct st_accel_tp {
	struct st_event_header hdr;
	__u64 value;
	__u32 event;      /* enum st_accel_tp_id */
	__u32 dev_index;  /* the driver's device_index */
	__u32 eng_id;     /* DMA engine (0 for copyin/copyout) */
	__u32 qid;        /* DMA queue (0 for copyin/copyout) */
	__u32 aux;
	__u32 pad_;
};

/*
 * A call into the RDMA verbs interface (ioctl RDMA_VERBS_IOCTL or a legacy
 * write(2) on /dev/infiniband/uverbsK): the EFA control path - protection
 * domains, completion and queue pairs, memory registrations. The data path
 * never enters the kernel. header = the calling task; ts_ns = return.
 */
#define ST_RDMA_BY_MAJOR (1u << 0) /* matched by the infiniband_verbs char major */
#define ST_RDMA_VIA_WRITE (1u << 1) /* legacy write(2) command, not the ioctl */
#define ST_RDMA_NO_CMD (~0u)
struct st_rdma_verb {
	struct st_event_header hdr;
	__u64 enter_ts;
	__u64 bytes;       /* memory registrations: the region's length; else 0 */
	__s64 ret;
	__u16 object_id;   /* UVERBS_OBJECT_* (0 for the write path) */
	__u16 method_id;
	__u32 write_cmd;   /* legacy command number (write path, INVOKE_WRITE), ST_RDMA_NO_CMD */
	__s32 fd;
	__u32 dev_index;   /* uverbs minor - 192 for real devices, --rdma-dev position otherwise */
	__u32 flags;       /* ST_RDMA_* */
	__u32 pad_;
};

/* Probes on user functions (runtime library, step marker). */
enum st_uprobe_id {
	ST_UP_NRT_EXECUTE = 1,
	ST_UP_NRT_TENSOR_WRITE = 2,
	ST_UP_NRT_TENSOR_READ = 3,
	ST_UP_STEP_MARKER = 4,
};
struct st_uprobe {
	struct st_event_header hdr;
	__u64 arg0;
	__s64 ret;
	__u32 probe;   /* enum st_uprobe_id */
	__u32 is_return;
};

/*
 * Time the host took from a target thread (ST_SUB_STEAL). Header: ts_ns =
 * the end, pid/tid = the thread the time was taken from.
 *  - IRQ / SOFTIRQ: handler time that ran while the thread was current,
 *    summed over its on-CPU slices from start_ns (when the first of those
 *    handlers began) and sent at a switch-out once it reaches 50 us or is
 *    20 ms old (0 = the slice that ends at ts_ns, as older captures
 *    have it). A hardirq inside a softirq counts as IRQ only.
 *  - DIRECT_RECLAIM / MEMCG_RECLAIM: one reclaim pass the thread ran itself
 *    (the zone is short of memory, or its cgroup is at its limit or
 *    memory.high), from start_ns to ts_ns, on a CPU or not.
 */
enum st_steal_kind {
	ST_STEAL_IRQ = 0,
	ST_STEAL_SOFTIRQ = 1,
	ST_STEAL_DIRECT_RECLAIM = 2,
	ST_STEAL_MEMCG_RECLAIM = 3,
	ST_STEAL_KIND_MAX = 4,
};
struct st_host_steal {
	struct st_event_header hdr;
	__u64 start_ns;
	__u64 ns;       /* time taken */
	__u32 kind;     /* enum st_steal_kind */
	__u32 count;    /* handler runs (IRQ/SOFTIRQ), pages reclaimed (reclaim) */
	__u32 detail;   /* SOFTIRQ: bit mask of the vectors (1 << NET_RX_SOFTIRQ ...); else 0 */
	__u32 pad_;
};

/*
 * An on-CPU stack sample (ST_SUB_SAMPLE): a CPU-clock perf event fired while
 * a target thread was on that CPU. Header: ts_ns = the sample, pid/tid = the
 * thread. Variable length: hdr.size = offsetof(ips) + 8 * (n_user + n_kernel
 * + n_python). ips[0, n_user) is the user stack, leaf first (frame-pointer
 * walk: code built without frame pointers yields fewer frames); then
 * n_kernel kernel addresses, leaf first (none when the sample hit user
 * mode); then n_python code objects of the thread's CPython frames,
 * innermost first (a process userspace registered in st_py_procs): the
 * address in bits 0-47, a tag of the object's names in bits 48-63.
 */
#define ST_SAMPLE_MAX_USER 64
#define ST_SAMPLE_MAX_KERNEL 32
#define ST_SAMPLE_MAX_PYTHON 32
#define ST_SAMPLE_USER_TRUNCATED (1u << 0)   /* the user walk filled every slot */
#define ST_SAMPLE_PYTHON_TRUNCATED (1u << 1) /* more Python frames than slots */
#define ST_SAMPLE_PYTHON_NO_THREAD (1u << 2) /* a Python process, but no thread state for this thread */
#define ST_PY_CODE_ADDR_MASK ((1ull << 48) - 1)
struct st_cpu_sample {
	struct st_event_header hdr;
	__u16 n_user;
	__u16 n_kernel;
	__u16 n_python;
	__u16 flags;  /* ST_SAMPLE_* */
	__u64 ips[ST_SAMPLE_MAX_USER + ST_SAMPLE_MAX_KERNEL + ST_SAMPLE_MAX_PYTHON];
};
#define ST_CPU_SAMPLE_HDR_SIZE 32

/*
 * A CPython process whose frames the sampler walks (value of st_py_procs,
 * keyed by tgid; written by userspace from the interpreter's symbols). The
 * thread's PyThreadState comes from the interpreter's pthread TSS key, as
 * pthread_getspecific finds it: *(fsbase + tss_base + tss_stride * key).
 * Offsets are the interpreter version's (CPython 3.11 and 3.12).
 */
struct st_py_proc {
	__u64 tss_key_addr;   /* address of the int key (_PyRuntime.autoTSSkey._key) */
	__u32 tss_base;       /* glibc: offsetof(struct pthread, specific_1stblock[0].data) */
	__u32 tss_stride;     /* sizeof(struct pthread_key_data) */
	__u16 tstate_cframe;  /* PyThreadState.cframe */
	__u16 cframe_current; /* _PyCFrame.current_frame */
	__u16 frame_code;     /* _PyInterpreterFrame.f_code (f_executable) */
	__u16 frame_previous; /* _PyInterpreterFrame.previous */
	__u16 frame_owner;    /* 3.12: the owner byte (3 = a C-stack shim frame, skipped); 0 = none */
	/* PyCodeObject: co_filename, co_name, co_qualname (three pointers from
	 * here); 0 = none. A hash of them tags each code address (bits 48-63 of
	 * the recorded value): a module's code object freed after import leaves
	 * its address to a later one, which must not inherit its name. */
	__u16 code_tag;
	__u16 pad_[2];
};

/* Per-CPU counters, one slot per kind. Userspace sums the CPUs. */
struct st_stats {
	__u64 emitted[ST_EV_KIND_MAX];
	__u64 dropped[ST_EV_KIND_MAX];  /* ring buffer full at reserve */
};

/*
 * Losses: state a collector could not keep, so that events, or the task they
 * belong to, are missing. Not records (no ST_ABI_VERSION bump): one per-CPU
 * struct st_losses in st_loss_map, summed over CPUs by userspace and reported
 * next to the ring-buffer drops. Kinds are append-only; capture trailers and
 * reports name them (loader/tracer.cpp loss_name), never number them.
 * Some slots are filled by userspace only (marked so): the report treats
 * every kind alike.
 */
enum st_loss_kind {
	/* sched_process_fork: a target's new process could not be added to
	 * st_targets (map full): it and its descendants are not traced. */
	ST_LOSS_FORK_TARGET = 0,
	/* block_rq_insert/issue: a target's request could not be tracked
	 * (st_rq full): no record for it. */
	ST_LOSS_BLOCK_RQ = 1,
	/* userspace, derived: st_socks (LRU) evicted live sockets; their later
	 * retransmits and state changes cannot be attributed. */
	ST_LOSS_SOCK_EVICTED = 2,
	/* st_proc_agg_map (LRU): processes evicted (userspace, derived) or whose
	 * entry could not be created (BPF); their aggregated counts restart. */
	ST_LOSS_AGG_EVICTED = 3,
	/* userspace: kretprobe returns the kernel missed (no free instance),
	 * from the links' info (kernels >= 6.7); the calls have no record. */
	ST_LOSS_KRETPROBE_MISSED = 4,
	/* userspace: a process userspace meant to trace could not be added to
	 * st_targets (daemon discovery, map full). */
	ST_LOSS_TARGET_ADD = 5,
	/* userspace: hook runs the kernel skipped because the same program was
	 * already running on that CPU (bpf_prog_info.recursion_misses, summed
	 * over the loaded programs): e.g. a block completion in a hard IRQ that
	 * interrupted the completion program in a softirq. */
	ST_LOSS_PROG_MISSED = 6,
	ST_LOSS_KIND_MAX = 7, /* one past the last kind */
};

/* Bookkeeping next to the losses (not losses): the LRU evictions above are
 * derived from them, as keys added - keys removed - keys still there. */
enum st_loss_ledger {
	ST_LEDGER_SOCK_ADDED = 0,   /* new st_socks keys (BPF_NOEXIST succeeded) */
	ST_LEDGER_SOCK_REMOVED = 1, /* st_socks keys deleted at TCP_CLOSE */
	ST_LEDGER_AGG_ADDED = 2,    /* new st_proc_agg_map keys */
	ST_LEDGER_RQ_STALE = 3,     /* st_rq entries of an earlier request at the same
				     * address, replaced or removed (never attributed) */
	ST_LEDGER_MAX = 4,
};

struct st_losses {
	__u64 lost[ST_LOSS_KIND_MAX];
	__u64 ledger[ST_LEDGER_MAX];
};

/* Key of st_accel_devs: a device file named by --accel-dev or --rdma-dev.
 * The value is the position in its option, | ST_DEV_IS_RDMA for --rdma-dev. */
#define ST_DEV_IS_RDMA (1u << 31)
struct st_accel_dev_key {
	__u32 dev;  /* kernel dev_t of the filesystem (s_dev) */
	__u32 pad_;
	__u64 ino;
};

#ifdef __cplusplus
static_assert(sizeof(struct st_config) == 48, "st_config layout");
static_assert(sizeof(struct st_event_header) == 24, "header layout");
static_assert(sizeof(struct st_sched_switch) == 56, "sched_switch layout");
static_assert(__builtin_offsetof(struct st_sched_switch, prev_queue_ns) == ST_SCHED_SWITCH_V1_SIZE, "v1 switch prefix");
static_assert(sizeof(struct st_sched_wakeup) == 72, "sched_wakeup layout");
static_assert(sizeof(struct st_task_new) == 56, "task_new layout");
static_assert(sizeof(struct st_task_comm) == 40, "task_comm layout");
static_assert(sizeof(struct st_task_exit) == 56, "task_exit layout");
static_assert(sizeof(struct st_block_rq) == 72, "block_rq layout");
static_assert(sizeof(struct st_sock_tuple) == 40, "tuple layout");
static_assert(sizeof(struct st_net_xfer) == 96, "net_xfer layout");
static_assert(__builtin_offsetof(struct st_net_xfer, seq_end) == ST_NET_XFER_V6_SIZE, "v6 net_xfer prefix");
static_assert(sizeof(struct st_tcp_retransmit) == 80, "retransmit layout");
static_assert(sizeof(struct st_tcp_state) == 80, "tcp_state layout");
static_assert(sizeof(struct st_accel_ioctl) == 64, "accel_ioctl layout");
static_assert(sizeof(struct st_uprobe) == 48, "uprobe layout");
static_assert(sizeof(struct st_accel_tp) == 56, "accel_tp layout");
static_assert(sizeof(struct st_rdma_verb) == 72, "rdma_verb layout");
static_assert(sizeof(struct st_accel_dev_key) == 16, "accel key layout");
static_assert(sizeof(struct st_host_steal) == 56, "host_steal layout");
static_assert(__builtin_offsetof(struct st_cpu_sample, ips) == ST_CPU_SAMPLE_HDR_SIZE, "cpu_sample layout");
static_assert(sizeof(struct st_py_proc) == 32, "py_proc layout");
static_assert(sizeof(struct st_losses) == 8 * ((int)ST_LOSS_KIND_MAX + (int)ST_LEDGER_MAX), "losses layout");
#endif

/*
 * In-kernel aggregation (daemon degradation level "aggregated"): instead of
 * per-event sched/net/block records, the programs add into one value per
 * traced process (tgid) in st_proc_agg_map, a per-CPU LRU hash that
 * userspace reads and sums over CPUs. Not a record: no ST_ABI_VERSION bump.
 * Counts are cumulative from the first event of the process seen with
 * aggregation on; a thread's first switch-out only sets its baseline.
 */
#define ST_MAX_AGG_PROCS 1024  /* LRU: the longest idle process is evicted first */
struct st_proc_agg {
	__u64 oncpu_ns;          /* se.sum_exec_runtime growth over the process's slices */
	__u64 runq_wait_ns;      /* schedstat run_delay growth (queue_ns of the switch-out) */
	__u64 switches;          /* context switches out of the CPU */
	__u64 involuntary;       /* of which involuntary: left the CPU still runnable */
	__u64 net_send_bytes;    /* TCP */
	__u64 net_recv_bytes;
	__u64 block_read_bytes;  /* completed block requests issued by the process */
	__u64 block_write_bytes;
	__u64 block_rqs;
};

#ifdef __cplusplus
static_assert(sizeof(struct st_proc_agg) == 72, "proc_agg layout");
#endif

/*
 * What userspace learns outside the kernel's records and the analysis needs
 * again on replay (a process's container and launcher identity, where a
 * runtime library was probed): written into the record stream by the
 * session, so live sessions and captures see the same facts in the same
 * place. BPF never emits it. The payload is a JSON object of `len` bytes
 * right after the struct (hdr.size = sizeof + len); "note" names its type.
 */
#define ST_USER_NOTE_MAX 16384
struct st_user_note {
	struct st_event_header hdr;
	__u32 len;
	__u32 reserved;
};

#ifdef __cplusplus
static_assert(sizeof(struct st_user_note) == 32, "user_note layout");
#endif

#endif /* STEPTRACE_ABI_H */
