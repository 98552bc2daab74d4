// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * sample.bpf.c - on-CPU stack samples of target threads (ST_SUB_SAMPLE).
 *
 * Userspace opens one CPU-clock perf event per CPU at a low rate (49 Hz by
 * default) and attaches this program to each. A sample of a task that is not
 * a target (most of them, and every idle CPU) returns after the filter. A
 * target's sample walks its user stack (frame pointers) and its kernel stack
 * into a per-CPU scratch record, and sends only the addresses found, so a
 * shallow stack costs a short record. A CPython process userspace registered
 * in st_py_procs also gets its interpreter frames (code objects). Symbols and
 * Python names are resolved in userspace.
 */
#include "common.bpf.h"

/* The record being built, and the kernel stack apart: it is copied in
 * behind the user frames by index (a bpf_get_stack into &ips[n_user], a
 * variable offset, is refused by 6.1's verifier). */
struct st_sample_scratch {
	struct st_cpu_sample rec;
	__u64 kips[ST_SAMPLE_MAX_KERNEL];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct st_sample_scratch);
} st_sample_scratch SEC(".maps") __weak;

/* CPython processes whose frames are walked, by tgid (struct st_py_proc). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct st_py_proc);
} st_py_procs SEC(".maps") __weak;

#define ST_SAMPLE_SLOTS (ST_SAMPLE_MAX_USER + ST_SAMPLE_MAX_KERNEL + ST_SAMPLE_MAX_PYTHON)

static __always_inline __u64 st_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (addr && bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		v = 0;
	return v;
}

/* One frame per bpf_loop iteration: a plain loop of probe reads and
 * branches is more than the verifier will walk. */
struct st_py_walk {
	const struct st_py_proc *py;
	__u64 frame;
	__u32 base; /* the first slot of the Python frames */
	__u32 n;
	__u16 flags;
};

static long st_py_step(__u32 i, void *ctx)
{
	struct st_py_walk *w = ctx;
	struct st_sample_scratch *sc;
	struct st_cpu_sample *r;
	__u32 zero = 0;
	__u64 code;
	__u8 owner = 0;

	if (!w->frame)
		return 1;
	if (w->py->frame_owner)
		bpf_probe_read_user(&owner, 1, (const void *)(w->frame + w->py->frame_owner));
	if (owner != 3) { /* 3.12: a shim frame owned by the C stack has no code */
		if (w->n >= ST_SAMPLE_MAX_PYTHON) {
			w->flags |= ST_SAMPLE_PYTHON_TRUNCATED;
			return 1;
		}
		code = st_read_ptr(w->frame + w->py->frame_code);
		sc = bpf_map_lookup_elem(&st_sample_scratch, &zero);
		if (!sc)
			return 1;
		r = &sc->rec;
		if (code && w->py->code_tag) {
			__u64 names[3] = {}, h;

			bpf_probe_read_user(names, sizeof(names), (const void *)(code + w->py->code_tag));
			h = names[0] ^ (names[1] * 0x9e3779b97f4a7c15ull) ^ ((names[2] << 17) | (names[2] >> 47));
			h ^= h >> 32;
			h ^= h >> 16;
			code = (code & ST_PY_CODE_ADDR_MASK) | (h << 48);
		}
		if (code) {
			r->ips[(w->base + w->n) & (ST_SAMPLE_SLOTS - 1)] = code;
			w->n++;
		}
	}
	w->frame = st_read_ptr(w->frame + w->py->frame_previous);
	return 0;
}

/*
 * The sampled thread's CPython frames, innermost first, as code-object
 * addresses from ips[base] on: its thread state from the interpreter's
 * pthread TSS slot (read from the thread's TLS block, so a thread that has
 * released the GIL still has its stack), then the frame chain.
 */
static __always_inline __u32 st_python_frames(const struct st_py_proc *py, struct st_cpu_sample *r, __u32 base)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 fsbase = BPF_CORE_READ(t, thread.fsbase);
	struct st_py_walk w = {.py = py, .base = base};
	__u64 tstate;
	__u32 key = 0;

	if (base + ST_SAMPLE_MAX_PYTHON > ST_SAMPLE_SLOTS)
		return 0;
	if (bpf_probe_read_user(&key, sizeof(key), (const void *)py->tss_key_addr) || key >= 32)
		goto no_thread;
	tstate = st_read_ptr(fsbase + py->tss_base + (__u64)py->tss_stride * key);
	if (!tstate)
		goto no_thread;
	w.frame = st_read_ptr(st_read_ptr(tstate + py->tstate_cframe) + py->cframe_current);
	bpf_loop(ST_SAMPLE_MAX_PYTHON + 8, st_py_step, &w, 0);
	r->flags |= w.flags;
	return w.n > ST_SAMPLE_MAX_PYTHON ? ST_SAMPLE_MAX_PYTHON : w.n;
no_thread:
	r->flags |= ST_SAMPLE_PYTHON_NO_THREAD;
#endif
	return 0;
}

SEC("perf_event")
int st_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct st_cpu_sample *r;
	struct st_stats *s;
	__u64 id, size;
	__u32 zero = 0, nu, nk, npy = 0, i;
	struct st_sample_scratch *sc;
	struct st_py_proc *py;
	long got;

	if (!(st_cfg.enabled & ST_SUB_SAMPLE) || !st_detail)
		return 0;
	id = bpf_get_current_pid_tgid();
	if ((__u32)id == 0 || !st_current_is_target())
		return 0;
	sc = bpf_map_lookup_elem(&st_sample_scratch, &zero);
	if (!sc)
		return 0;
	r = &sc->rec;
	/* Counts are masked, not clamped: the helpers never return more than
	 * the size given, and 6.1's verifier lost the bounds of a clamped count
	 * (an empty range, then "invalid mem access" at the first use). */
	nu = 0;
	got = bpf_get_stack(ctx, r->ips, ST_SAMPLE_MAX_USER * sizeof(__u64), BPF_F_USER_STACK);
	if (got > 0)
		nu = ((__u32)got >> 3) & (ST_SAMPLE_SLOTS - 1);
	r->flags = nu == ST_SAMPLE_MAX_USER ? ST_SAMPLE_USER_TRUNCATED : 0;
	nk = 0;
	got = bpf_get_stack(ctx, sc->kips, ST_SAMPLE_MAX_KERNEL * sizeof(__u64), 0);
	if (got > 0)
		nk = ((__u32)got >> 3) & (ST_SAMPLE_SLOTS - 1);
	for (i = 0; i < ST_SAMPLE_MAX_KERNEL; i++) {
		if (i >= nk)
			break;
		r->ips[(nu + i) & (ST_SAMPLE_SLOTS - 1)] = sc->kips[i];
	}
	py = bpf_map_lookup_elem(&st_py_procs, &(__u32){id >> 32});
	if (py)
		npy = st_python_frames(py, r, nu + nk);
	r->n_user = nu;
	r->n_kernel = nk;
	r->n_python = npy;
	size = ST_CPU_SAMPLE_HDR_SIZE + (__u64)(nu + nk + npy) * sizeof(__u64);
	if (size > sizeof(*r))
		size = sizeof(*r);
	r->hdr.size = size;
	r->hdr.kind = ST_EV_CPU_SAMPLE;
	r->hdr.cpu = bpf_get_smp_processor_id();
	r->hdr.ts_ns = bpf_ktime_get_ns();
	r->hdr.pid = id >> 32;
	r->hdr.tid = (__u32)id;
	s = st_stats();
	/* A copy, not a reservation: the record's length is known only now.
	 * Never a wake-up: samples are rare and the drain timer takes them. */
	if (bpf_ringbuf_output(&st_events, r, size, BPF_RB_NO_WAKEUP)) {
		if (s)
			s->dropped[ST_EV_CPU_SAMPLE]++;
		return 0;
	}
	if (s)
		s->emitted[ST_EV_CPU_SAMPLE]++;
	return 0;
}
