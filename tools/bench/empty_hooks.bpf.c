// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * empty_hooks.bpf.c - B0 of tools/bench: a program that does nothing on each
 * hook steptrace's collectors attach to, with the same attach type (tp_btf).
 * What a real collector costs over these is what its own code costs: the
 * hook's entry and the program call are paid by any tracer on that hook.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* sched: sched.bpf.c's hooks (switch and waking fire per event, the others per task). */
SEC("tp_btf/sched_switch") int empty_sched_switch(void *ctx) { return 0; }
SEC("tp_btf/sched_waking") int empty_sched_waking(void *ctx) { return 0; }
SEC("tp_btf/sched_wakeup_new") int empty_sched_wakeup_new(void *ctx) { return 0; }
SEC("tp_btf/sched_process_fork") int empty_sched_process_fork(void *ctx) { return 0; }
SEC("tp_btf/sched_process_exec") int empty_sched_process_exec(void *ctx) { return 0; }
SEC("tp_btf/sched_process_exit") int empty_sched_process_exit(void *ctx) { return 0; }
SEC("tp_btf/task_rename") int empty_task_rename(void *ctx) { return 0; }

/* syscall: the accelerator tier where kprobes are missing (accel_ioctl.bpf.c). */
SEC("tp_btf/sys_enter") int empty_sys_enter(void *ctx) { return 0; }
SEC("tp_btf/sys_exit") int empty_sys_exit(void *ctx) { return 0; }

/*
 * syscall-tp: the per-syscall tracepoints the accelerator tier could use
 * instead (B14). ftrace's syscall events hang off the same raw sys_enter and
 * sys_exit tracepoints and test one bit per syscall number; only a hooked
 * call builds a record for the program.
 */
SEC("tracepoint/syscalls/sys_enter_ioctl") int empty_tp_sys_enter_ioctl(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_exit_ioctl") int empty_tp_sys_exit_ioctl(void *ctx) { return 0; }

/* syscall-tp-net: the per-syscall events the net collector stamps (the
 * socket calls a net record times from their entry; accel_ioctl.bpf.c). */
SEC("tracepoint/syscalls/sys_enter_read") int empty_tpn_sys_enter_read(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_write") int empty_tpn_sys_enter_write(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_readv") int empty_tpn_sys_enter_readv(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_writev") int empty_tpn_sys_enter_writev(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_sendto") int empty_tpn_sys_enter_sendto(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_recvfrom") int empty_tpn_sys_enter_recvfrom(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_sendmsg") int empty_tpn_sys_enter_sendmsg(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_recvmsg") int empty_tpn_sys_enter_recvmsg(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_sendmmsg") int empty_tpn_sys_enter_sendmmsg(void *ctx) { return 0; }
SEC("tracepoint/syscalls/sys_enter_recvmmsg") int empty_tpn_sys_enter_recvmmsg(void *ctx) { return 0; }

/* block: block.bpf.c's request hooks. */
SEC("tp_btf/block_rq_insert") int empty_block_rq_insert(void *ctx) { return 0; }
SEC("tp_btf/block_rq_issue") int empty_block_rq_issue(void *ctx) { return 0; }
SEC("tp_btf/block_rq_complete") int empty_block_rq_complete(void *ctx) { return 0; }

/* net: net.bpf.c's tracepoint tier. */
SEC("tp_btf/sock_send_length") int empty_sock_send_length(void *ctx) { return 0; }
SEC("tp_btf/sock_recv_length") int empty_sock_recv_length(void *ctx) { return 0; }
SEC("tp_btf/inet_sock_set_state") int empty_inet_sock_set_state(void *ctx) { return 0; }
/* Every TCP segment the host receives (st_tcp_probe's segment arrivals). */
SEC("tp_btf/tcp_probe") int empty_tcp_probe(void *ctx) { return 0; }
