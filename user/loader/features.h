// SPDX-License-Identifier: Apache-2.0
// What this kernel offers, probed in one place. The loader picks attach
// tiers from this, `steptrace check` prints it, and every report names it.
#pragma once

#include <string>
#include <vector>

namespace steptrace {

struct KernelFeatures {
  std::string release;           // uname -r
  std::string btf_path;          // BTF used for CO-RE ("" when none found)
  std::string btf_tried;         // the BTF file that could not be read (when !btf)
  bool btf = false;
  bool ringbuf = false;
  bool task_storage = false;
  bool kprobes = false;          // kprobe PMU present (CONFIG_KPROBES)
  bool uprobes = false;          // uprobe PMU present
  std::string tracefs;           // mount point, "" when not mounted
  // Tracepoints known to the kernel's BTF (btf_trace_<name> typedefs).
  bool tp_sock_length = false;   // sock:sock_send_length / sock_recv_length (>= 6.3)
  bool tp_task_rename = false;
  bool tp_block_rq = false;
  bool tp_block_rq_requeue = false;  // keep a requeued request's owner (block.bpf.c)
  bool tp_block_rq_merge = false;    // forget a request merged into another
  bool tp_inet_sock_set_state = false;
  bool tp_tcp_retransmit = false;
  bool tp_tcp_probe = false;       // tcp:tcp_probe (segments arriving: the clock bound across hosts)
  bool tp_sys_enter = false;
  // ftrace's per-syscall events (syscalls:sys_enter_ioctl, ...) for every
  // call the syscall tier hooks, with the layout bpf/accel_ioctl.bpf.c reads
  // (CONFIG_FTRACE_SYSCALLS and tracefs mounted).
  bool syscall_tps = false;
  bool tp_irq = false;             // irq:irq_handler_entry/exit and softirq_entry/exit
  bool tp_direct_reclaim = false;  // vmscan:mm_vmscan_direct_reclaim_begin/end
  bool tp_memcg_reclaim = false;   // vmscan:mm_vmscan_memcg_reclaim_begin/end (CONFIG_MEMCG)
  // Kprobe-tier targets.
  bool kprobe_tcp = false;         // tcp_sendmsg and tcp_recvmsg are functions in the kernel's BTF
  bool neuron_ioctl_sym = false;   // ncdev_ioctl of the neuron module in /proc/kallsyms
  // bpf_link_info reports a kprobe link's missed count (perf_event.kprobe.missed, >= 6.7).
  bool link_kprobe_missed = false;
  // neuron:* driver tracepoints present with the layout steptrace reads, and
  // those present but skipped ("event: reason").
  std::vector<std::string> neuron_tps, neuron_tps_skipped;
  int kernel_major = 0, kernel_minor = 0;
};

// `btf_override` is --btf; empty means /sys/kernel/btf/vmlinux.
KernelFeatures probe_features(const std::string& btf_override);

}  // namespace steptrace
