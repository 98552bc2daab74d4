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
  // tp_btf sys_enter: yields (sched), accelerator ioctls when accel_kprobe is
  // off, uverbs calls, call durations for net_tp. Every syscall on the host
  // pays its filter, so it is off when nothing needs it.
  bool syscalls = false;
  // tp_btf sys_exit as well: only the device calls emit at the exit (accel
  // ioctls on the syscall tier, uverbs calls). The syscall a thread is in is
  // read from its saved registers (bpf/common.bpf.h, st_task_syscall).
  bool syscall_exit = false;
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
};

// allow_kprobes=false forces the tracepoint tiers (--no-kprobes, for comparison).
// accel_devs: --accel-dev files were given. Those may be any file (a simulated
// device), which only the syscall hook sees, so the kprobe tier is not used.
// rdma_verbs: uverbs devices exist (or --rdma-dev was given); their calls are
// only seen by the syscall hook, so it stays attached for them.
TierPlan plan_tiers(const KernelFeatures& f, uint32_t subsystems, bool allow_kprobes = true, bool accel_devs = false,
                    bool rdma_verbs = false);

}  // namespace steptrace
