// SPDX-License-Identifier: Apache-2.0
// Attach tiers: which hook each collector uses on this kernel, chosen from
// the probed features, best (cheapest, most complete) first. Pure, so the
// choice is unit-tested for each kernel we support; BpfTracer applies the
// plan, `steptrace check` and every report print it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/features.h"
#include "capture/attach_tier.h"

namespace steptrace {

struct TierPlan {
  // Syscall entries: accelerator ioctls when accel_kprobe is off, uverbs
  // calls, call durations for net_tp. Every syscall on the host pays for the
  // hook, so it is off when nothing needs it (yields are counted at the
  // switch-out, the syscall a thread is in read from its saved registers).
  bool syscalls = false;
  // Exits as well: only the device calls emit at the exit (accel ioctls on
  // the syscall tier, uverbs calls).
  bool syscall_exit = false;
  // The syscall programs are loaded (attached only as needed): a kprobe tier
  // that fails to attach falls back to them.
  bool syscalls_loaded = false;
  // Per-syscall events (syscalls:sys_enter_ioctl, ...) instead of the raw
  // tp_btf sys_enter/sys_exit: the other syscalls pay a bit test, not a
  // program run (B14). Where tracefs has those events with ftrace's layout.
  bool syscall_tps = false;
  bool accel_kprobe = false;  // kprobe/kretprobe ncdev_ioctl (neuron module) instead of the syscall hook
  bool net_tp = false;        // tp_btf sock_send_length/sock_recv_length (>= 6.3)
  bool net_kprobe = false;    // kprobe/kretprobe tcp_sendmsg/tcp_recvmsg (6.1)
  // Socket owners in BPF_MAP_TYPE_SK_STORAGE (no table to fill, nothing
  // evicted) rather than the st_socks LRU: only when no net program is a
  // kprobe, whose socket pointer the sk storage helpers do not take.
  bool socks_in_sk = false;
  std::vector<std::string> neuron_tps;  // neuron:* tracepoints to attach (accel evidence)
  bool accel_devs = false;              // --accel-dev given (kept for describe())
  bool rdma_verbs = false;              // uverbs calls decoded in the syscall hook (EFA control path)
  std::vector<AttachTier> describe(uint32_t subsystems, const KernelFeatures& f) const;
  // The per-syscall events each program goes on ("sys_enter_ioctl", ...),
  // given whether device calls come through the syscall hook (false when the
  // kprobe tier holds them).
  std::vector<std::string> syscall_enters(bool device_calls) const;
  std::vector<std::string> syscall_exits(bool device_calls) const;
  // "syscalls:sys_enter_ioctl/..." or "tp_btf sys_enter/sys_exit" with what it serves.
  std::string syscall_tier(uint32_t subsystems, bool device_calls) const;
};

// allow_kprobes=false forces the tracepoint tiers (--no-kprobes, for comparison).
// accel_devs: --accel-dev files were given. Those may be any file (a simulated
// device), which only the syscall hook sees, so the kprobe tier is not used.
// rdma_verbs: uverbs devices exist (or --rdma-dev was given); their calls are
// only seen by the syscall hook, so it stays attached for them.
TierPlan plan_tiers(const KernelFeatures& f, uint32_t subsystems, bool allow_kprobes = true, bool accel_devs = false,
                    bool rdma_verbs = false);

}  // namespace steptrace
