// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * accel_ioctl.bpf.c - ioctls on accelerator device files: command, duration,
 * device index and, for copy ioctls, the byte count read from the user
 * argument.
 *
 * The syscall boundary is hooked once (tp_btf sys_enter/sys_exit) and does
 * three cheap jobs for target threads: accelerator ioctls, counting
 * sched_yield() calls (the Neuron runtime's busy-poll), and stamping the
 * syscall in progress (what a thread was blocked in, send/recv durations).
 * Attaching a second program to the same hook would double the per-syscall
 * tax, which every syscall on the host pays; non-target threads leave after
 * one tgid lookup.
 */
#include "common.bpf.h"
#include "neuron_uapi.h"

#define ST_NR_IOCTL 16       /* x86_64 */
#define ST_NR_SCHED_YIELD 24 /* x86_64 */

/* Where the byte count lives in the argument, by command; 0 = no bytes. */
static __always_inline void st_accel_classify(__u32 cmd, __u32 *size_off, __u32 *size_len,
					     __u32 *dir_off)
{
	*size_off = 0;
	*size_len = 0;
	*dir_off = 0;
	switch (cmd) {
	case NEURON_CMD_MEM_BUF_COPY:
		*size_off = NEURON_ARG_SIZE_OFF_COMMON;
		*size_len = 4;
		*dir_off = NEURON_ARG_DIR_OFF_MEM_BUF_COPY;
		break;
	case NEURON_CMD_MEM_BUF_COPY64:
	case NEURON_CMD_MEM_BUF_ZEROCOPY64:
	case NEURON_CMD_MEM_BUF_ZEROCOPY64_V2:
		*size_off = NEURON_ARG_SIZE_OFF_COMMON;
		*size_len = 8;
		*dir_off = NEURON_ARG_DIR_OFF_MEM_BUF_COPY64;
		break;
	case NEURON_CMD_MEM_COPY:
	case NEURON_CMD_MEM_COPY_ASYNC:
		*size_off = NEURON_ARG_SIZE_OFF_COMMON;
		*size_len = 4;
		break;
	case NEURON_CMD_MEM_COPY64:
	case NEURON_CMD_MEM_COPY64_V2:
	case NEURON_CMD_MEM_COPY_ASYNC64:
		*size_off = NEURON_ARG_SIZE_OFF_COMMON;
		*size_len = 8;
		break;
	case NEURON_CMD_MEMSET:
		*size_off = NEURON_ARG_SIZE_OFF_MEMSET;
		*size_len = 4;
		break;
	case NEURON_CMD_MEMSET64:
		*size_off = NEURON_ARG_SIZE_OFF_MEMSET64;
		*size_len = 8;
		break;
	case NEURON_CMD_PROGRAM_ENGINE:
		*size_off = NEURON_ARG_SIZE_OFF_COMMON;
		*size_len = 4;
		break;
	case NEURON_CMD_PROGRAM_ENGINE_NC:
		*size_off = NEURON_ARG_SIZE_OFF_PROGRAM_ENGINE_NC;
		*size_len = 4;
		break;
	case NEURON_CMD_PROGRAM_ENGINE_NC64:
		*size_off = NEURON_ARG_SIZE_OFF_PROGRAM_ENGINE_NC;
		*size_len = 8;
		break;
	case NEURON_CMD_DMA_COPY_DESCRIPTORS:
	case NEURON_CMD_DMA_COPY_DESCRIPTORS64:
		/* num_descs (u32); converted to bytes below */
		*size_off = NEURON_ARG_NDESC_OFF;
		*size_len = 4;
		break;
	default:
		break;
	}
}

/* fd -> (device index, flags) when the fd is an accelerator device file. */
static __always_inline bool st_accel_match_fd(int fd, __u32 *dev_index, __u32 *flags)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct file **fds;
	struct file *f = NULL;
	struct inode *ino;
	unsigned int max_fds;

	if (fd < 0)
		return false;
	max_fds = BPF_CORE_READ(t, files, fdt, max_fds);
	if ((unsigned int)fd >= max_fds)
		return false;
	fds = BPF_CORE_READ(t, files, fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return false;
	ino = BPF_CORE_READ(f, f_inode);
	if (!ino)
		return false;

	/* A real Neuron device: a char device whose major is "neuron" in /proc/devices. */
	if (st_cfg.neuron_major) {
		umode_t mode = BPF_CORE_READ(ino, i_mode);
		dev_t rdev = BPF_CORE_READ(ino, i_rdev);

		if ((mode & 00170000) == 0020000 && (rdev >> 20) == st_cfg.neuron_major) {
			*dev_index = rdev & 0xfffff;
			*flags = ST_ACCEL_BY_MAJOR;
			return true;
		}
	}
	/* A file named with --accel-dev (works for a simulated device too). */
	if (st_cfg.n_accel_devs) {
		struct st_accel_dev_key key = {};
		__u32 *idx;

		key.dev = BPF_CORE_READ(ino, i_sb, s_dev);
		key.ino = BPF_CORE_READ(ino, i_ino);
		idx = bpf_map_lookup_elem(&st_accel_devs, &key);
		if (idx) {
			*dev_index = *idx;
			*flags = 0;
			return true;
		}
	}
	return false;
}

/* Remember an accelerator ioctl in flight: cmd, device, and the bytes it moves. */
static __always_inline void st_accel_record(struct st_task_state *ts, int fd, __u32 cmd, void *arg,
					    __u32 dev_index, __u32 flags)
{
	__u32 size_off, size_len, dir_off;
	__u64 bytes = 0;

	st_accel_classify(cmd, &size_off, &size_len, &dir_off);
	if (size_len == 8) {
		bpf_probe_read_user(&bytes, 8, arg + size_off);
	} else if (size_len == 4) {
		__u32 v = 0;

		bpf_probe_read_user(&v, 4, arg + size_off);
		bytes = v;
	}
	if (cmd == NEURON_CMD_DMA_COPY_DESCRIPTORS || cmd == NEURON_CMD_DMA_COPY_DESCRIPTORS64)
		bytes *= NEURON_DMA_DESC_BYTES;
	if (dir_off) {
		__u32 to_dev = 0;

		bpf_probe_read_user(&to_dev, 4, arg + dir_off);
		flags |= to_dev ? ST_ACCEL_H2D : ST_ACCEL_D2H;
	}
	ts->accel_pending = 1;
	ts->accel_cmd = cmd;
	ts->accel_fd = fd;
	ts->accel_dev_index = dev_index;
	ts->accel_flags = flags;
	ts->accel_bytes = bytes;
}

static __always_inline void st_accel_enter(struct st_task_state *ts, struct pt_regs *regs, __u64 now)
{
	int fd = (int)BPF_CORE_READ(regs, di);
	__u32 cmd = (__u32)BPF_CORE_READ(regs, si);
	void *arg = (void *)BPF_CORE_READ(regs, dx);
	__u32 dev_index = 0, flags = 0;

	/* Neuron commands carry magic 'N'; anything else cannot be ours. */
	if (NEURON_IOC_TYPE(cmd) != NEURON_IOC_MAGIC)
		return;
	if (!st_accel_match_fd(fd, &dev_index, &flags))
		return;
	st_accel_record(ts, fd, cmd, arg, dev_index, flags);
}

static __always_inline void st_accel_emit(struct st_task_state *ts, __u64 enter_ts, long ret)
{
	struct st_accel_ioctl *e;

	ts->accel_pending = 0;
	e = st_reserve(sizeof(*e), ST_EV_ACCEL_IOCTL);
	if (!e)
		return;
	e->enter_ts = enter_ts;
	e->bytes = ts->accel_bytes;
	e->ret = ret;
	e->cmd = ts->accel_cmd;
	e->fd = ts->accel_fd;
	e->dev_index = ts->accel_dev_index;
	e->flags = ts->accel_flags;
	st_submit(e);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(st_sys_enter, struct pt_regs *regs, long id)
{
	struct st_task_state *ts;
	__u64 now;

	if (!st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), true);
	if (!ts)
		return 0;
	now = bpf_ktime_get_ns();
	ts->sys_nr = id;
	ts->sys_enter_ts = now;
	ts->sys_arg0 = BPF_CORE_READ(regs, di);
	if (id == ST_NR_SCHED_YIELD)
		ts->yields++;
	else if (id == ST_NR_IOCTL && (st_cfg.enabled & ST_SUB_ACCEL) && st_accel_in_syscalls)
		st_accel_enter(ts, regs, now);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(st_sys_exit, struct pt_regs *regs, long ret)
{
	struct st_task_state *ts;

	if (!st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (!ts)
		return 0;
	if (ts->accel_pending && st_accel_in_syscalls)
		st_accel_emit(ts, ts->sys_enter_ts, ret);
	ts->sys_nr = -1;
	return 0;
}

/*
 * Kprobe tier: the Neuron driver's ioctl handler, ncdev_ioctl(file, cmd, arg).
 * Only ioctls that reach the driver pay anything (no per-syscall tax on the
 * host); used instead of the syscall hook when /proc/kallsyms has the symbol
 * and the kernel has kprobes. The file is the driver's own, so the device
 * index is its minor.
 */
SEC("kprobe/ncdev_ioctl")
int BPF_KPROBE(st_kp_ncdev_ioctl, struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct st_task_state *ts;
	dev_t rdev;
	int fd = -1;

	if (!(st_cfg.enabled & ST_SUB_ACCEL) || st_accel_in_syscalls)
		return 0;
	if (NEURON_IOC_TYPE(cmd) != NEURON_IOC_MAGIC || !st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), true);
	if (!ts)
		return 0;
	if (!ts->sys_enter_ts)
		ts->sys_nr = -1; /* storage just created here: no syscall stamped */
	else if (ts->sys_nr == ST_NR_IOCTL)
		fd = (int)ts->sys_arg0; /* the syscall hook runs too (sched enabled) */
	rdev = BPF_CORE_READ(filp, f_inode, i_rdev);
	st_accel_record(ts, fd, cmd, (void *)arg, rdev & 0xfffff, ST_ACCEL_BY_MAJOR | ST_ACCEL_VIA_KPROBE);
	ts->accel_enter_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("kretprobe/ncdev_ioctl")
int BPF_KRETPROBE(st_kret_ncdev_ioctl, long ret)
{
	struct st_task_state *ts;

	if (st_accel_in_syscalls || !st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (ts && ts->accel_pending)
		st_accel_emit(ts, ts->accel_enter_ts, ret);
	return 0;
}

/*
 * The driver's own classic tracepoints (neuron:*; the module has no BTF, so no
 * tp_btf). Layouts as in the driver's neuron_trace.h after the 8-byte common
 * header; the loader attaches these only when the format files in tracefs
 * match these offsets (loader/tp_format.cpp), so a changed driver is skipped,
 * never misread.
 */
struct st_ntp_dma_queue_copy_start {
	__u64 common_;
	__u32 device_index;
	__u32 eng_id;
	__u32 qid;
	__u32 tx_desc_count;
	__u32 rx_desc_count;
};
struct st_ntp_dma_ack_completed {
	__u64 common_;
	__u32 device_index;
	__u32 eng_id;
	__u32 qid;
	__u32 count;
};
struct st_ntp_mem_copyio {
	__u64 common_;
	__u32 device_index;
	__u32 pad_;
	__u64 mc;
	__u64 buffer;
	__u32 offset; /* never assigned by the driver */
	__u32 size;
};

static __always_inline int st_accel_tp(__u32 event, __u32 dev_index, __u32 eng_id, __u32 qid, __u64 value,
				       __u32 aux)
{
	struct st_accel_tp *e;

	if (!(st_cfg.enabled & ST_SUB_ACCEL) || !st_current_is_target())
		return 0;
	e = st_reserve(sizeof(*e), ST_EV_ACCEL_TP);
	if (!e)
		return 0;
	e->value = value;
	e->event = event;
	e->dev_index = dev_index;
	e->eng_id = eng_id;
	e->qid = qid;
	e->aux = aux;
	e->pad_ = 0;
	st_submit(e);
	return 0;
}

SEC("tracepoint/neuron/dma_queue_copy_start")
int st_ntp_copy_start(struct st_ntp_dma_queue_copy_start *c)
{
	return st_accel_tp(ST_NTP_DMA_QUEUE_COPY_START, c->device_index, c->eng_id, c->qid, c->tx_desc_count,
			   c->rx_desc_count);
}

SEC("tracepoint/neuron/dma_ack_completed")
int st_ntp_ack_completed(struct st_ntp_dma_ack_completed *c)
{
	return st_accel_tp(ST_NTP_DMA_ACK_COMPLETED, c->device_index, c->eng_id, c->qid, c->count, 0);
}

SEC("tracepoint/neuron/ioctl_mem_copyin")
int st_ntp_mem_copyin(struct st_ntp_mem_copyio *c)
{
	return st_accel_tp(ST_NTP_MEM_COPYIN, c->device_index, 0, 0, c->size, 0);
}

SEC("tracepoint/neuron/ioctl_mem_copyout")
int st_ntp_mem_copyout(struct st_ntp_mem_copyio *c)
{
	return st_accel_tp(ST_NTP_MEM_COPYOUT, c->device_index, 0, 0, c->size, 0);
}
