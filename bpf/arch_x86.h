/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * x86_64 facts, in one place for both sides: the system call numbers the BPF
 * programs and the analysis compare against, and the pt_regs fields the
 * syscall hook reads its arguments from. Plain C with no kernel types, like
 * steptrace_abi.h, so userspace includes it too (user/decode/syscalls.h).
 * steptrace is x86_64 only until a vmlinux/arm64 exists (cmake/BpfObject.cmake).
 */
#ifndef STEPTRACE_ARCH_X86_H
#define STEPTRACE_ARCH_X86_H

/* System call numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
#define ST_NR_READ 0
#define ST_NR_WRITE 1
#define ST_NR_READV 19
#define ST_NR_WRITEV 20
#define ST_NR_SENDTO 44
#define ST_NR_RECVFROM 45
#define ST_NR_SENDMSG 46
#define ST_NR_RECVMSG 47
#define ST_NR_RECVMMSG 299
#define ST_NR_SENDMMSG 307
#define ST_NR_POLL 7
#define ST_NR_IOCTL 16
#define ST_NR_SELECT 23
#define ST_NR_SCHED_YIELD 24
#define ST_NR_EPOLL_WAIT 232
#define ST_NR_PSELECT6 270
#define ST_NR_PPOLL 271
#define ST_NR_EPOLL_PWAIT 281
#define ST_NR_EPOLL_PWAIT2 441

/*
 * Registers at the syscall boundary (BPF side only): the first three
 * arguments and the number. `regs` is the tp_btf sys_enter/sys_exit
 * argument, a BTF pointer, so these are direct loads (CO-RE relocated
 * through vmlinux.h's preserve_access_index) that the verifier turns into
 * fault-guarded loads: no bpf_probe_read_kernel call (about 20 ns each on
 * the hot path; see docs/performance.md, "Cheaper records").
 */
#define ST_SYSCALL_ARG0(regs) ((regs)->di)
#define ST_SYSCALL_ARG1(regs) ((regs)->si)
#define ST_SYSCALL_ARG2(regs) ((regs)->dx)
#define ST_SYSCALL_NR(regs) ((regs)->orig_ax)
/*
 * The return value slot: the entry code stores -ENOSYS there before the
 * call (entry_SYSCALL_64, PUSH_AND_CLEAR_REGS rax=$-ENOSYS) and the result
 * only once the call returns, so while it holds -ENOSYS the task is inside
 * the syscall in ST_SYSCALL_NR. An entry from user space by an interrupt
 * or exception leaves the user's rax there instead (and orig_ax -1, the
 * vector or the error code).
 */
#define ST_SYSCALL_RET(regs) ((regs)->ax)
#define ST_ENOSYS 38

#endif /* STEPTRACE_ARCH_X86_H */
