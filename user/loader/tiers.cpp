// SPDX-License-Identifier: Apache-2.0
#include "loader/tiers.h"

#include <cstring>

#include "steptrace_abi.h"

namespace steptrace {

TierPlan plan_tiers(const KernelFeatures& f, uint32_t sub, bool allow_kprobes, bool accel_devs, bool rdma_verbs) {
  TierPlan p;
  const bool kp = allow_kprobes && f.kprobes;
  p.accel_devs = accel_devs;
  p.rdma_verbs = rdma_verbs && (sub & ST_SUB_ACCEL);
  if (sub & ST_SUB_ACCEL) {
    p.accel_kprobe = kp && f.neuron_ioctl_sym && !accel_devs;
    if (!f.tracefs.empty()) p.neuron_tps = f.neuron_tps;
  }
  if (sub & ST_SUB_NET) {
    p.net_tp = f.tp_sock_length;
    p.net_kprobe = !p.net_tp && kp && f.kprobe_tcp;
    p.socks_in_sk = !p.net_kprobe;
  }
  p.syscall_exit = ((sub & ST_SUB_ACCEL) && !p.accel_kprobe) || p.rdma_verbs;
  p.syscalls = p.syscall_exit || p.net_tp;
  p.syscalls_loaded = p.syscalls || (sub & ST_SUB_ACCEL);
  p.syscall_tps = p.syscalls_loaded && f.syscall_tps;
  return p;
}

std::vector<std::string> TierPlan::syscall_enters(bool device_calls) const {
  std::vector<std::string> v;
  if (device_calls) v.push_back("sys_enter_ioctl");
  if (rdma_verbs || net_tp) v.push_back("sys_enter_write");
  if (net_tp)
    for (const char* c : {"read", "readv", "writev", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg"})
      v.push_back(std::string("sys_enter_") + c);
  return v;
}

std::vector<std::string> TierPlan::syscall_exits(bool device_calls) const {
  std::vector<std::string> v;
  if (device_calls) v.push_back("sys_exit_ioctl");
  if (rdma_verbs) v.push_back("sys_exit_write");
  return v;
}

std::string TierPlan::syscall_tier(uint32_t sub, bool device_calls) const {
  const auto enters = syscall_enters(device_calls), exits = syscall_exits(device_calls);
  if (enters.empty()) return "not attached (no per-syscall tax)";
  std::string what;
  auto add = [&](const char* w) { what += (what.empty() ? "" : ", ") + std::string(w); };
  if ((sub & ST_SUB_ACCEL) && device_calls) add("accel ioctls");
  if (rdma_verbs) add("uverbs calls");
  if (net_tp) add("net call durations");
  if (!syscall_tps) return (exits.empty() ? "tp_btf sys_enter (" : "tp_btf sys_enter/sys_exit (") + what + ")";
  std::string calls;
  for (const auto& e : enters) calls += (calls.empty() ? "" : ",") + e.substr(std::strlen("sys_enter_"));
  return "syscalls:sys_enter_{" + calls + "}" + (exits.empty() ? "" : exits.size() == 1 ? " + sys_exit_ioctl"
                                                                                        : " + sys_exit_{ioctl,write}") +
         " (" + what + ")";
}

std::vector<AttachTier> TierPlan::describe(uint32_t sub, const KernelFeatures& f) const {
  std::vector<AttachTier> t;
  t.push_back({"sched", (sub & ST_SUB_SCHED) ? "tp_btf sched_switch/sched_waking" : "disabled"});
  const bool device_calls = (sub & ST_SUB_ACCEL) && !accel_kprobe;
  t.push_back({"syscalls", syscall_tier(sub, device_calls)});
  const std::string sys_hook = syscall_tps ? "syscalls:sys_enter/exit_ioctl" : "tp_btf sys_enter/sys_exit";
  if (!(sub & ST_SUB_ACCEL)) {
    t.push_back({"accel", "disabled"});
  } else {
    t.push_back({"accel", accel_kprobe ? "kprobe/kretprobe ncdev_ioctl [neuron]"
                          : accel_devs ? sys_hook + ", filtered to device files (--accel-dev given)"
                                       : sys_hook + ", filtered to device files"});
    std::string tps;
    for (const auto& n : neuron_tps) tps += (tps.empty() ? "neuron:" : ",") + n;
    if (tps.empty())
      tps = f.tracefs.empty() ? "none (tracefs not mounted)" : "none (no neuron:* tracepoints with the known layout)";
    t.push_back({"accel_tp", tps});
    t.push_back({"efa_ctl", rdma_verbs ? (syscall_tps ? "syscalls:sys_enter/exit_{ioctl,write}" : "tp_btf sys_enter/sys_exit") +
                                             std::string(", ioctl/write on uverbs files (EFA control path)")
                                       : "none (no infiniband_verbs devices, no --rdma-dev)"});
  }
  if (!(sub & ST_SUB_BLOCK)) t.push_back({"block", "disabled"});
  else
    t.push_back({"block", f.tp_block_rq ? "tp_btf block_rq_insert/issue/complete"
                                        : "unavailable: no block_rq tracepoints"});
  if (!(sub & ST_SUB_STEAL)) {
    t.push_back({"steal", "disabled"});
  } else {
    std::string s;
    auto add = [&s](const char* what) { s += (s.empty() ? "" : ", ") + std::string(what); };
    if (sub & ST_SUB_SCHED) add("CPU throttling (sched_switch + cfs_rq throttle_count)");
    if ((sub & ST_SUB_SCHED) && f.tp_irq) add("tp_btf irq_handler/softirq entry/exit");
    if (f.tp_direct_reclaim) add("tp_btf mm_vmscan_direct_reclaim");
    if (f.tp_memcg_reclaim) add("tp_btf mm_vmscan_memcg_reclaim");
    t.push_back({"steal", s.empty() ? "unavailable: no irq or vmscan tracepoints, sched collector off" : s});
  }
  if (!(sub & ST_SUB_SAMPLE)) t.push_back({"sample", "disabled"});
  else t.push_back({"sample", "perf_event cpu-clock per CPU, user (frame pointers) and kernel stacks"});
  // Segment arrivals (tcp_probe) only narrow the clock bound across hosts.
  const std::string arrivals =
      std::string(f.tp_tcp_probe ? ", tcp_probe arrivals" : "") + (socks_in_sk ? ", socket owners in sk storage" : "");
  if (!(sub & ST_SUB_NET)) t.push_back({"net", "disabled"});
  else if (net_tp) t.push_back({"net", "tp_btf sock_send_length/sock_recv_length + tcp state" + arrivals});
  else if (net_kprobe) t.push_back({"net", "kprobe/kretprobe tcp_sendmsg/tcp_recvmsg + tcp state" + arrivals});
  else t.push_back({"net", "tcp state/retransmit only (no per-call bytes on this kernel)"});
  return t;
}

}  // namespace steptrace
