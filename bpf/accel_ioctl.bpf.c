// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * accel_ioctl.bpf.c - ioctls on accelerator device files: command, duration,
 * device index and, for copy ioctls, the byte count read from the user
 * argument.
 *
 * The syscall boundary does two jobs for target threads: accelerator (and
 * uverbs) calls, and stamping the entry of the socket calls a net record
 * times. Two tiers, the same code (st_sys_enter_do / st_sys_exit_do):
 *  - ftrace's per-syscall events (syscalls:sys_enter_ioctl, ...; st_tps_*),
 *    one program attached to each call it needs. Every other syscall on the
 *    host pays one bit test, not a program run: the raw hooks cost ~150 ns
 *    on each syscall of every task, ~50-80 with these (B14), and a
 *    busy-polling runtime's sched_yield() calls are hundreds of thousands a
 *    second. A hooked call pays more (~200 ns a side): device calls are few.
 *  - the raw tp_btf sys_enter/sys_exit where tracefs lacks those events.
 * Non-target threads leave after one bit test of their tgid.
 */
#include "common.bpf.h"
#include "neuron_uapi.h"
#include "rdma_uapi.h"
#include "arch_x86.h" /* syscall numbers and argument registers */

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

/* What an fd is, for the syscall tier. */
enum st_devfile { ST_DEVFILE_NONE = 0, ST_DEVFILE_NEURON = 1, ST_DEVFILE_RDMA = 2 };

/*
 * fd -> (class, device index, flags): a Neuron device or a uverbs file.
 *
 * The task's fd table is reached by direct loads (the task is a BTF
 * pointer); the fd's struct file and what follows by bpf_probe_read_kernel
 * (an fd indexes an array, which the verifier does not allow on a BTF
 * pointer). A device file once matched is kept in the thread's state, keyed
 * by its inode's address and number: a runtime that issues thousands of
 * ioctls a second on one device pays two reads per call instead of the
 * inode walk and the st_accel_devs lookup (bpf_stats, B13: st_sys_enter on
 * the ioctl loop, see docs/performance.md). Only matches are kept: a file
 * named with --accel-dev may be registered after the job first used it.
 */
static __always_inline int st_devfile_match(struct st_task_state *ts, int fd, __u32 *dev_index, __u32 *flags)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fdtable *fdt;
	struct file **fds;
	struct file *f = NULL;
	struct inode *ino;
	unsigned long i_ino;
	int cls = ST_DEVFILE_NONE;

	if (fd < 0)
		return ST_DEVFILE_NONE;
	fdt = t->files->fdt;
	if (!fdt || (unsigned int)fd >= fdt->max_fds)
		return ST_DEVFILE_NONE;
	fds = fdt->fd;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return ST_DEVFILE_NONE;
	ino = BPF_CORE_READ(f, f_inode);
	if (!ino)
		return ST_DEVFILE_NONE;
	i_ino = BPF_CORE_READ(ino, i_ino);
	if (ts->devfile_class && ts->devfile_inode == (__u64)ino && ts->devfile_ino == i_ino) {
		*dev_index = ts->devfile_index;
		*flags = ts->devfile_flags;
		return ts->devfile_class;
	}

	/* Real devices: char devices whose major is "neuron" / "infiniband_verbs" in /proc/devices. */
	if (st_cfg.neuron_major || st_cfg.uverbs_major) {
		umode_t mode = BPF_CORE_READ(ino, i_mode);
		dev_t rdev = BPF_CORE_READ(ino, i_rdev);

		if ((mode & 00170000) == 0020000) {
			if (st_cfg.neuron_major && (rdev >> 20) == st_cfg.neuron_major) {
				*dev_index = rdev & 0xfffff;
				*flags = ST_ACCEL_BY_MAJOR;
				cls = ST_DEVFILE_NEURON;
			} else if (st_cfg.uverbs_major && (rdev >> 20) == st_cfg.uverbs_major) {
				__u32 minor = rdev & 0xfffff;

				*dev_index = minor >= UVERBS_FIRST_MINOR ? minor - UVERBS_FIRST_MINOR : minor;
				*flags = ST_RDMA_BY_MAJOR;
				cls = ST_DEVFILE_RDMA;
			}
		}
	}
	/* A file named with --accel-dev / --rdma-dev (works for a simulated device too). */
	if (cls == ST_DEVFILE_NONE && st_cfg.n_accel_devs) {
		struct st_accel_dev_key key = {};
		__u32 *idx;

		key.dev = BPF_CORE_READ(ino, i_sb, s_dev);
		key.ino = i_ino;
		idx = bpf_map_lookup_elem(&st_accel_devs, &key);
		if (idx) {
			*dev_index = *idx & ~ST_DEV_IS_RDMA;
			*flags = 0;
			cls = (*idx & ST_DEV_IS_RDMA) ? ST_DEVFILE_RDMA : ST_DEVFILE_NEURON;
		}
	}
	if (cls != ST_DEVFILE_NONE) {
		ts->devfile_inode = (__u64)ino;
		ts->devfile_ino = i_ino;
		ts->devfile_index = *dev_index;
		ts->devfile_flags = *flags;
		ts->devfile_class = cls;
	}
	return cls;
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

static __always_inline void st_accel_enter(struct st_task_state *ts, __u64 a0, __u64 a1, __u64 a2)
{
	int fd = (int)a0;
	__u32 cmd = (__u32)a1;
	void *arg = (void *)a2;
	__u32 dev_index = 0, flags = 0;

	/* Neuron commands carry magic 'N'; anything else cannot be ours. */
	if (NEURON_IOC_TYPE(cmd) != NEURON_IOC_MAGIC)
		return;
	if (st_devfile_match(ts, fd, &dev_index, &flags) != ST_DEVFILE_NEURON)
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

/*
 * EFA control path: calls on uverbs files (/dev/infiniband/uverbsK). The
 * verbs library talks to the kernel through one ioctl (object + method +
 * attributes) or, on old kernels, legacy commands written with write(2);
 * only setup and teardown come here (the data path bypasses the kernel).
 * Decoded at entry (the user buffers are the caller's), emitted at exit.
 */
#define ST_RDMA_MAX_ATTRS 8

static __always_inline void st_rdma_ioctl_enter(struct st_task_state *ts, void *arg, __u32 dev_index,
						__u32 flags)
{
	__u16 hdr[4] = {};
	__u64 bytes = 0, core_in = 0;
	__u32 write_cmd = ST_RDMA_NO_CMD;
	__u16 object, method, num_attrs;
	int i;

	if (bpf_probe_read_user(hdr, sizeof(hdr), arg))
		return;
	object = hdr[UVERBS_HDR_OFF_OBJECT / 2];
	method = hdr[UVERBS_HDR_OFF_METHOD / 2];
	num_attrs = hdr[UVERBS_HDR_OFF_NUM_ATTRS / 2];
	/* A legacy command wrapped in an ioctl names itself in an attribute; a
	 * dma-buf registration carries its length inline. */
	if ((object == UVERBS_OBJ_DEVICE && method == UVERBS_METH_INVOKE_WRITE) ||
	    (object == UVERBS_OBJ_MR && method == UVERBS_METH_REG_DMABUF_MR)) {
		for (i = 0; i < ST_RDMA_MAX_ATTRS; i++) {
			__u64 attr[2] = {};
			__u16 id;

			if (i >= num_attrs)
				break;
			if (bpf_probe_read_user(attr, sizeof(attr), arg + UVERBS_HDR_BYTES + i * UVERBS_ATTR_BYTES))
				break;
			id = (__u16)attr[0];
			if (object == UVERBS_OBJ_MR) {
				if (id == UVERBS_ATTR_REG_DMABUF_MR_LENGTH)
					bytes = attr[1];
			} else if (id == UVERBS_ATTR_WRITE_CMD) {
				write_cmd = (__u32)attr[1] & UVERBS_CMD_MASK;
			} else if (id == UVERBS_ATTR_CORE_IN) {
				core_in = attr[1];
			}
		}
		if (write_cmd == UVERBS_CMD_REG_MR && core_in)
			bpf_probe_read_user(&bytes, sizeof(bytes), (void *)(core_in + UVERBS_REG_MR_OFF_LENGTH));
	}
	ts->rdma_pending = 1;
	ts->rdma_object = object;
	ts->rdma_method = method;
	ts->rdma_write_cmd = write_cmd;
	ts->rdma_bytes = bytes;
	ts->rdma_dev_index = dev_index;
	ts->rdma_flags = flags;
}

static __always_inline void st_rdma_write_enter(struct st_task_state *ts, void *buf, __u64 count, __u32 dev_index,
						__u32 flags)
{
	__u32 command = 0;
	__u64 bytes = 0;

	if (count < UVERBS_CMD_HDR_BYTES || bpf_probe_read_user(&command, sizeof(command), buf))
		return;
	command &= UVERBS_CMD_MASK; /* extended commands set bit 31; the number is the low byte */
	if (command == UVERBS_CMD_REG_MR)
		bpf_probe_read_user(&bytes, sizeof(bytes), buf + UVERBS_CMD_HDR_BYTES + UVERBS_REG_MR_OFF_LENGTH);
	ts->rdma_pending = 1;
	ts->rdma_object = 0;
	ts->rdma_method = 0;
	ts->rdma_write_cmd = command;
	ts->rdma_bytes = bytes;
	ts->rdma_dev_index = dev_index;
	ts->rdma_flags = flags | ST_RDMA_VIA_WRITE;
}

static __always_inline void st_rdma_enter(struct st_task_state *ts, long id, __u64 a0, __u64 si, __u64 dx)
{
	/* ioctl(fd, cmd, arg) / write(fd, buf, count) */
	int fd = (int)a0;
	__u32 dev_index = 0, flags = 0;

	if (id == ST_NR_IOCTL && (__u32)si != RDMA_VERBS_IOCTL_CMD)
		return;
	if (st_devfile_match(ts, fd, &dev_index, &flags) != ST_DEVFILE_RDMA)
		return;
	if (id == ST_NR_IOCTL)
		st_rdma_ioctl_enter(ts, (void *)dx, dev_index, flags);
	else
		st_rdma_write_enter(ts, (void *)si, dx, dev_index, flags);
	if (ts->rdma_pending)
		ts->accel_fd = fd;
}

static __always_inline void st_rdma_emit(struct st_task_state *ts, __u64 enter_ts, long ret)
{
	struct st_rdma_verb *e;

	ts->rdma_pending = 0;
	e = st_reserve(sizeof(*e), ST_EV_RDMA_VERB);
	if (!e)
		return;
	e->enter_ts = enter_ts;
	e->bytes = ts->rdma_bytes;
	e->ret = ret;
	e->object_id = ts->rdma_object;
	e->method_id = ts->rdma_method;
	e->write_cmd = ts->rdma_write_cmd;
	e->fd = ts->accel_fd;
	e->dev_index = ts->rdma_dev_index;
	e->flags = ts->rdma_flags;
	e->pad_ = 0;
	st_submit(e);
}

/*
 * Syscalls whose entry time a record uses: the device calls (accel and
 * uverbs records carry the call's start) and, with the net collector on,
 * the calls that move socket data (a net record's duration is the time
 * since the syscall's entry). No other syscall touches the thread's state.
 */
static __always_inline bool st_sys_stamped(long id)
{
	if (id == ST_NR_IOCTL && (st_cfg.enabled & ST_SUB_ACCEL))
		return true;
	if (id == ST_NR_WRITE && (st_cfg.enabled & ST_SUB_ACCEL) && st_cfg.rdma_verbs)
		return true;
	if (!(st_cfg.enabled & ST_SUB_NET))
		return false;
	switch (id) {
	case ST_NR_READ:
	case ST_NR_WRITE:
	case ST_NR_READV:
	case ST_NR_WRITEV:
	case ST_NR_SENDTO:
	case ST_NR_RECVFROM:
	case ST_NR_SENDMSG:
	case ST_NR_RECVMSG:
	case ST_NR_SENDMMSG:
	case ST_NR_RECVMMSG:
		return true;
	default:
		return false;
	}
}

static __always_inline int st_sys_enter_do(long id, __u64 a0, __u64 a1, __u64 a2)
{
	struct st_task_state *ts;
	__u64 now;

	/* Only the calls records time touch the thread's state; what any other
	 * syscall a thread is in is read from the kernel's saved registers where
	 * a record wants it (st_task_syscall). Detail off (the daemon's
	 * sampled-out windows, aggregated): the stamps feed only records that
	 * are off. Only device-file calls go on. */
	if (st_detail) {
		if (!st_sys_stamped(id))
			return 0;
	} else if (id != ST_NR_IOCTL && (id != ST_NR_WRITE || !st_cfg.rdma_verbs)) {
		return 0;
	}
	if (!st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), true);
	if (!ts)
		return 0;
	/* The clock costs ~80 ns a read on this VM (B13: st_sys_enter 169 -> 88 ns
	 * over empty without it): only the calls records time come here. */
	now = bpf_ktime_get_ns();
	ts->sys_nr = id;
	ts->sys_enter_ts = now;
	if (id == ST_NR_IOCTL && (st_cfg.enabled & ST_SUB_ACCEL) && st_accel_in_syscalls)
		st_accel_enter(ts, a0, a1, a2);
	/* Off (rodata) unless uverbs devices exist or --rdma-dev was given. */
	if ((id == ST_NR_IOCTL || id == ST_NR_WRITE) && (st_cfg.enabled & ST_SUB_ACCEL) && st_cfg.rdma_verbs &&
	    !ts->accel_pending)
		st_rdma_enter(ts, id, a0, a1, a2);
	return 0;
}

static __always_inline int st_sys_exit_do(long nr, long ret)
{
	struct st_task_state *ts;

	/* Only device calls emit at the exit; a net record compares the stamp's
	 * number with the call the thread is in (net.bpf.c), and the loader
	 * attaches the exit only where device calls come through it. */
	if (!(st_cfg.enabled & ST_SUB_ACCEL) || (nr != ST_NR_IOCTL && (nr != ST_NR_WRITE || !st_cfg.rdma_verbs)))
		return 0;
	if (!st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (!ts)
		return 0;
	if (ts->accel_pending && st_accel_in_syscalls)
		st_accel_emit(ts, ts->sys_enter_ts, ret);
	if (ts->rdma_pending)
		st_rdma_emit(ts, ts->sys_enter_ts, ret);
	ts->sys_nr = -1;
	return 0;
}

/* The raw tier: every syscall of every task comes here. */
SEC("tp_btf/sys_enter")
int BPF_PROG(st_sys_enter, struct pt_regs *regs, long id)
{
	return st_sys_enter_do(id, ST_SYSCALL_ARG0(regs), ST_SYSCALL_ARG1(regs), ST_SYSCALL_ARG2(regs));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(st_sys_exit, struct pt_regs *regs, long ret)
{
	return st_sys_exit_do(ST_SYSCALL_NR(regs), ret);
}

/*
 * The per-syscall tier: one program each for entries and exits, attached by
 * the loader to the events of the calls it needs (syscalls:sys_enter_ioctl,
 * ..., loader/tracer.cpp); the section names one of them. The layout is
 * ftrace's for every syscall event (checked against the format files, as
 * the neuron:* ones are): the number, then the arguments or the return.
 */
struct st_syscall_tp_enter {
	__u64 common_;
	__s32 nr;
	__u32 pad_;
	__u64 args[6];
};

struct st_syscall_tp_exit {
	__u64 common_;
	__s32 nr;
	__u32 pad_;
	__s64 ret;
};

SEC("tracepoint/syscalls/sys_enter_ioctl")
int st_tps_enter(struct st_syscall_tp_enter *c)
{
	return st_sys_enter_do(c->nr, c->args[0], c->args[1], c->args[2]);
}

SEC("tracepoint/syscalls/sys_exit_ioctl")
int st_tps_exit(struct st_syscall_tp_exit *c)
{
	return st_sys_exit_do(c->nr, c->ret);
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
	{
		__u64 arg0 = 0;

		if (st_task_syscall(bpf_get_current_task_btf(), &arg0) == ST_NR_IOCTL)
			fd = (int)arg0;
	}
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
 * tp_btf). Their layouts (struct st_ntp_*) live in neuron_uapi.h, shared with
 * the loader, which attaches these only when the format files in tracefs
 * match those offsets (loader/kernel_text.cpp), so a changed driver is
 * skipped, never misread.
 */
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
