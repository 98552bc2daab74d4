// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * net.bpf.c - TCP traffic of target threads: bytes per send/recv with the
 * socket's 4-tuple and the time spent in the call, retransmits and state
 * changes.
 *
 * Tiers: the sock:sock_{send,recv}_length tracepoints (>= 6.3) give per-call
 * bytes in task context; on kernels without them (6.1) the kprobe tier on
 * tcp_sendmsg/tcp_recvmsg (below) takes over where kprobes exist. The loader
 * picks one (loader/tracer.cpp) and reports it. Retransmits and
 * state changes run in softirq context, so sockets seen in target context are
 * remembered in st_socks. EFA control-path probes (efa_reg_mr, efa_create_qp)
 * belong in this file as a further SEC group, autoloaded only when the efa
 * module is present.
 */
#include "common.bpf.h"
#include "core_fixes.bpf.h"

#define ST_AF_INET 2
#define ST_AF_INET6 10
#define ST_IPPROTO_TCP 6
#define ST_TCP_CLOSE 7

/*
 * Sockets of target tasks, so softirq-side events (arrivals, retransmits,
 * state changes) can be attributed to their owner.
 *
 * Where every net program is a tp_btf one (socket-call tracepoints, >= 6.3,
 * or tcp state only), the owner lives in the socket itself: a
 * BPF_MAP_TYPE_SK_STORAGE slot (st_sk_owner), found through the socket's own
 * storage list and freed with the socket. No hash, no table to fill, nothing
 * evicted. Its lookup replaced the LRU's on every socket call (B13, net: see
 * docs/performance.md). The kprobe tier (6.1) has the socket as a number
 * from registers, which sk storage helpers do not take, so there the owners
 * stay in st_socks below; st_cfg.socks_in_sk (rodata) says which, and each
 * program holds only its own kind of lookup.
 *
 * st_socks is an LRU: when full it evicts the least recently used socket
 * rather than refuse new ones, and says nothing. Evictions are counted the
 * only way they can be: new keys (ST_LEDGER_SOCK_ADDED) less keys deleted at
 * TCP_CLOSE (ST_LEDGER_SOCK_REMOVED) less keys still present (userspace
 * counts them), reported as ST_LOSS_SOCK_EVICTED. What cannot be counted:
 * which socket was evicted, and how many of its retransmits and state changes
 * were then missed (once evicted, nothing marks the socket as a target's).
 * Every TCP socket ends in TCP_CLOSE, so a key that is gone and not deleted
 * there was evicted; without the inet_sock_set_state program (kernels
 * lacking it) the count also includes sockets that closed unseen.
 */
struct st_sock_owner {
	__u32 tgid;       /* owning process */
	__u32 pad_;
	__u64 arrival_ns; /* the last arrival recorded (st_tcp_probe) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ST_MAX_SOCKS);
	__type(key, __u64);
	__type(value, struct st_sock_owner);
} st_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct st_sock_owner);
} st_sk_owner SEC(".maps");

/* The owner of a target's socket, or NULL. `sk` must be a BTF pointer when
 * st_cfg.socks_in_sk is set (every program that runs then is a tp_btf one). */
static __always_inline struct st_sock_owner *st_sock_owner(struct sock *sk)
{
	__u64 sock_id = (__u64)sk;

	if (st_cfg.socks_in_sk)
		return bpf_sk_storage_get(&st_sk_owner, sk, NULL, 0);
	return bpf_map_lookup_elem(&st_socks, &sock_id);
}

/* Mark `sk` as process `tgid`'s (a target's), as a new owner or a change. */
static __always_inline void st_sock_own(struct sock *sk, __u32 tgid)
{
	struct st_sock_owner *owner;
	__u64 sock_id = (__u64)sk;

	if (st_cfg.socks_in_sk) {
		owner = bpf_sk_storage_get(&st_sk_owner, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
		if (owner && owner->tgid != tgid)
			owner->tgid = tgid; /* new (zeroed), or passed to another process */
		return;
	}
	owner = bpf_map_lookup_elem(&st_socks, &sock_id);
	if (owner) {
		if (owner->tgid != tgid)
			owner->tgid = tgid; /* passed to another process */
	} else if (bpf_map_update_elem(&st_socks, &sock_id, &(struct st_sock_owner){.tgid = tgid}, BPF_NOEXIST) == 0) {
		st_count_ledger(ST_LEDGER_SOCK_ADDED);
	}
}

/* At most one arrival per socket in this long: the clock bound needs the
 * quickest exchanges, which start after a quiet socket (always recorded),
 * not every segment of a bulk transfer (64 KB segments with GRO, MTU-sized
 * without). */
#define ST_ARRIVAL_GAP_NS 1000000ull

/*
 * A socket's fields, read directly where the socket came as a tracepoint's
 * BTF argument (the verifier knows its type: a plain load, CO-RE relocated),
 * through bpf_probe_read_kernel where it came from a kprobe's registers (a
 * number to the verifier). `direct` is a constant at every call, so each
 * program holds only its own kind of read. Direct reads took 20-80 ns off a
 * socket call's record here (B13, builds alternated: sock_send_length
 * +479/+442 -> +438/+418 ns over empty, sock_recv_length +514/+489 ->
 * +433/+423).
 */
#define ST_SK_READ(direct, sk, field) ((direct) ? (sk)->field : BPF_CORE_READ(sk, field))

static __always_inline bool st_sk_is_tcp(struct sock *sk, bool direct)
{
	__u16 family = ST_SK_READ(direct, sk, __sk_common.skc_family);

	if (family != ST_AF_INET && family != ST_AF_INET6)
		return false;
	if (direct)
		return BPF_CORE_READ_BITFIELD(sk, sk_protocol) == ST_IPPROTO_TCP;
	return BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol) == ST_IPPROTO_TCP;
}

static __always_inline void st_sk_tuple(struct sock *sk, struct st_sock_tuple *t, bool direct)
{
	__u16 family = ST_SK_READ(direct, sk, __sk_common.skc_family);

	__builtin_memset(t, 0, sizeof(*t));
	t->family = family;
	/*
	 * skc_portpair = { __be16 skc_dport; __u16 skc_num; } read as one word
	 * (little-endian hosts: dport in the low half). Reading skc_num through
	 * the anonymous struct by itself came back 0 with clang 14.
	 */
	__u32 pp = ST_SK_READ(direct, sk, __sk_common.skc_portpair);
	t->dport = __builtin_bswap16((__u16)(pp & 0xffff));
	t->sport = (__u16)(pp >> 16);
	if (family == ST_AF_INET) {
		__u32 s = ST_SK_READ(direct, sk, __sk_common.skc_rcv_saddr);
		__u32 d = ST_SK_READ(direct, sk, __sk_common.skc_daddr);

		/* v4-mapped: ::ffff:a.b.c.d */
		t->saddr[10] = 0xff;
		t->saddr[11] = 0xff;
		t->daddr[10] = 0xff;
		t->daddr[11] = 0xff;
		__builtin_memcpy(&t->saddr[12], &s, 4);
		__builtin_memcpy(&t->daddr[12], &d, 4);
	} else if (st_sk_has_v6()) {
		if (direct) {
			__builtin_memcpy(t->saddr, sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8, 16);
			__builtin_memcpy(t->daddr, sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8, 16);
		} else {
			BPF_CORE_READ_INTO(&t->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
			BPF_CORE_READ_INTO(&t->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		}
	}
}

/* dur_ns: the caller's measure of the call; ~0 = from the syscall hook's entry stamp. */
static __always_inline int st_net_xfer(struct sock *sk, int ret, __u32 dir, __u64 dur_ns, bool direct)
{
	struct task_struct *cur;
	struct st_task_state *ts;
	struct st_net_xfer *e;
	__u64 now, sock_id = (__u64)sk, id;
	__u32 tgid;

	if (!(st_cfg.enabled & ST_SUB_NET) || ret <= 0)
		return 0;
	id = bpf_get_current_pid_tgid();
	tgid = id >> 32;
	if (!st_current_tgid_is_target(tgid))
		return 0;
	if (!st_sk_is_tcp(sk, direct))
		return 0;
	now = bpf_ktime_get_ns();
	st_sock_own(sk, tgid);
	if (st_aggregate) {
		struct st_proc_agg *agg = st_proc_agg_get(tgid);

		if (agg) {
			if (dir == ST_NET_SEND)
				agg->net_send_bytes += ret;
			else
				agg->net_recv_bytes += ret;
		}
	}
	if (!st_detail)
		return 0;
	e = st_reserve_for(sizeof(*e), ST_EV_NET_XFER, tgid, (__u32)id, now);
	if (!e)
		return 0;
	cur = bpf_get_current_task_btf();
	ts = st_task_state_get(cur, false);
	e->sock_id = sock_id;
	if (dur_ns != ~0ull)
		e->dur_ns = dur_ns;
	else
		/* The stamp is this call's when the thread is still in a call of
		 * the number stamped (sys_exit may not run: tiers.cpp). */
		e->dur_ns = ts && ts->sys_nr >= 0 && ts->sys_enter_ts &&
					    st_task_syscall(cur, NULL) == ts->sys_nr
				    ? now - ts->sys_enter_ts
				    : 0;
	st_sk_tuple(sk, &e->tuple, direct);
	e->bytes = ret;
	e->dir = dir;
	/*
	 * Read after the call: write_seq has moved past the bytes just queued,
	 * copied_seq past the bytes just read (a MSG_PEEK leaves it behind them:
	 * the range is then bytes read earlier, still before this call's end,
	 * which is all the clock bound needs).
	 */
	if (dir == ST_NET_SEND)
		e->seq_end = BPF_CORE_READ((struct tcp_sock *)sk, write_seq);
	else
		e->seq_end = BPF_CORE_READ((struct tcp_sock *)sk, copied_seq);
	e->flags = ST_NET_SEQ_VALID;
	st_submit(e);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(st_sock_send_length, struct sock *sk, int ret, int flags)
{
	return st_net_xfer(sk, ret, ST_NET_SEND, ~0ull, true);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(st_sock_recv_length, struct sock *sk, int ret, int flags)
{
	return st_net_xfer(sk, ret, ST_NET_RECV, ~0ull, true);
}

/*
 * Kprobe tier (6.1: no sock_*_length tracepoints): tcp_sendmsg/tcp_recvmsg.
 * The entry probe remembers the socket in task storage (target threads only),
 * the return probe emits the same record with bytes = return value and
 * dur_ns = time inside the call. Not recursive: one call in flight per thread.
 */
static __always_inline int st_net_kp_enter(struct sock *sk)
{
	struct st_task_state *ts;

	if (!(st_cfg.enabled & ST_SUB_NET) || !st_current_is_target())
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), true);
	if (!ts)
		return 0;
	if (!ts->sys_enter_ts)
		ts->sys_nr = -1; /* storage just created here: no syscall stamped */
	ts->net_sk = (__u64)sk;
	ts->net_enter_ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int st_net_kp_exit(int ret, __u32 dir)
{
	struct st_task_state *ts;
	struct sock *sk;
	__u64 t0;

	if (!(st_cfg.enabled & ST_SUB_NET))
		return 0;
	ts = st_task_state_get(bpf_get_current_task_btf(), false);
	if (!ts || !ts->net_sk)
		return 0;
	sk = (struct sock *)ts->net_sk;
	t0 = ts->net_enter_ts;
	ts->net_sk = 0;
	return st_net_xfer(sk, ret, dir, bpf_ktime_get_ns() - t0, false);
}

SEC("kprobe/tcp_sendmsg")
int BPF_KPROBE(st_kp_tcp_sendmsg, struct sock *sk)
{
	return st_net_kp_enter(sk);
}

SEC("kretprobe/tcp_sendmsg")
int BPF_KRETPROBE(st_kret_tcp_sendmsg, int ret)
{
	return st_net_kp_exit(ret, ST_NET_SEND);
}

SEC("kprobe/tcp_recvmsg")
int BPF_KPROBE(st_kp_tcp_recvmsg, struct sock *sk)
{
	return st_net_kp_enter(sk);
}

SEC("kretprobe/tcp_recvmsg")
int BPF_KRETPROBE(st_kret_tcp_recvmsg, int ret)
{
	return st_net_kp_exit(ret, ST_NET_RECV);
}

/*
 * A segment with data reached a target's socket (tcp_rcv_established, in
 * softirq or from the socket's backlog): when it arrived, not when a
 * receive call returned it. The receive call's end bounds the sender's
 * clock from one side only after the receiver woke and copied; the
 * arrival is tens of microseconds earlier on a busy host, so the clock
 * bound across hosts (multinode/stream_match.h) narrows by as much. Only
 * sockets a target already used (st_socks), at most one a millisecond per
 * socket (ST_ARRIVAL_GAP_NS); the record is a net_xfer with
 * ST_NET_ARRIVAL, the owner's pid and tid 0, and no call time.
 */
SEC("tp_btf/tcp_probe")
int BPF_PROG(st_tcp_probe, struct sock *sk, const struct sk_buff *skb)
{
	struct st_net_xfer *e;
	struct tcphdr th;
	__u64 sock_id = (__u64)sk;
	struct st_sock_owner *owner;
	__u32 len, hdr_len;
	__u64 now;
	unsigned char *data;

	if (!(st_cfg.enabled & ST_SUB_NET) || !st_detail)
		return 0;
	owner = st_sock_owner(sk);
	if (!owner)
		return 0;
	/* The gap first: inside it (most segments of a bulk stream) nothing of
	 * the segment is read. */
	now = bpf_ktime_get_ns();
	if (now - owner->arrival_ns < ST_ARRIVAL_GAP_NS)
		return 0;
	data = skb->data;
	len = skb->len;
	if (bpf_probe_read_kernel(&th, sizeof(th), data))
		return 0;
	hdr_len = (__u32)th.doff * 4;
	if (hdr_len < sizeof(th) || len <= hdr_len)
		return 0; /* no data: an ACK (the gap stays open for the next data) */
	owner->arrival_ns = now;
	e = st_reserve_for(sizeof(*e), ST_EV_NET_XFER, owner->tgid, 0, now);
	if (!e)
		return 0;
	e->sock_id = sock_id;
	e->dur_ns = 0;
	st_sk_tuple(sk, &e->tuple, true);
	e->bytes = (__s32)(len - hdr_len);
	e->dir = ST_NET_RECV;
	e->seq_end = __builtin_bswap32(th.seq) + (len - hdr_len);
	e->flags = ST_NET_SEQ_VALID | ST_NET_ARRIVAL;
	st_submit(e);
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(st_tcp_retransmit_skb, struct sock *sk, struct sk_buff *skb)
{
	struct st_tcp_retransmit *e;
	struct st_sock_owner *owner;
	__u64 sock_id = (__u64)sk;

	if (!(st_cfg.enabled & ST_SUB_NET))
		return 0;
	owner = st_sock_owner(sk);
	if (!owner || !st_detail)
		return 0;
	e = st_reserve_for(sizeof(*e), ST_EV_TCP_RETRANSMIT, owner->tgid, 0, bpf_ktime_get_ns());
	if (!e)
		return 0;
	e->sock_id = sock_id;
	st_sk_tuple(sk, &e->tuple, true);
	e->state = sk->__sk_common.skc_state;
	e->pad_ = 0;
	st_submit(e);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(st_inet_sock_set_state, struct sock *sk, int oldstate, int newstate)
{
	struct st_tcp_state *e;
	__u64 sock_id = (__u64)sk;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct st_sock_owner *owner;

	if (!(st_cfg.enabled & ST_SUB_NET))
		return 0;
	if (BPF_CORE_READ_BITFIELD(sk, sk_protocol) != ST_IPPROTO_TCP)
		return 0;
	owner = st_sock_owner(sk);
	if (owner) {
		tgid = owner->tgid;
	} else {
		/* connect()/listen()/accept-side transitions run in the owner's context. */
		if (!st_current_tgid_is_target(tgid))
			return 0;
		st_sock_own(sk, tgid);
	}
	/* Detail off: the owner bookkeeping above and below still runs. */
	e = st_detail ? st_reserve_for(sizeof(*e), ST_EV_TCP_STATE, tgid, 0, bpf_ktime_get_ns()) : NULL;
	if (e) {
		e->sock_id = sock_id;
		st_sk_tuple(sk, &e->tuple, true);
		e->old_state = oldstate;
		e->new_state = newstate;
		st_submit(e);
	}
	/* sk storage goes with the socket; the LRU's key is deleted here, which
	 * the eviction count relies on. */
	if (newstate == ST_TCP_CLOSE && !st_cfg.socks_in_sk && bpf_map_delete_elem(&st_socks, &sock_id) == 0)
		st_count_ledger(ST_LEDGER_SOCK_REMOVED);
	return 0;
}
