// SPDX-License-Identifier: Apache-2.0
#include "loader/preflight.h"

#include <fmt/core.h>

#include <sstream>

#include "loader/tiers.h"
#include "steptrace_abi.h"
#include "util/sys_root.h"

namespace steptrace {

Capabilities parse_cap_eff(const std::string& text) {
  Capabilities c;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    unsigned long long v = 0;
    try {
      v = std::stoull(line.substr(7), nullptr, 16);
    } catch (...) {
      return c;
    }
    c.sys_admin = v & (1ull << 21);
    c.perfmon = v & (1ull << 38);
    c.bpf = v & (1ull << 39);
  }
  return c;
}

Capabilities read_capabilities(const std::string& proc_root) {
  auto s = read_small_file(proc_root + "/self/status");
  return s ? parse_cap_eff(*s) : Capabilities{};
}

std::string parse_lockdown(const std::string& text) {
  auto a = text.find('[');
  auto b = text.find(']', a == std::string::npos ? 0 : a);
  if (a == std::string::npos || b == std::string::npos) return "";
  return text.substr(a + 1, b - a - 1);
}

std::vector<CheckRow> run_preflight(const KernelFeatures& f, const Capabilities& caps, const std::string& lockdown) {
  std::vector<CheckRow> rows;
  bool privileged = caps.sys_admin || (caps.bpf && caps.perfmon);
  rows.push_back({"privileges", privileged ? CheckStatus::ok : CheckStatus::fail,
                  privileged ? (caps.sys_admin ? "CAP_SYS_ADMIN" : "CAP_BPF + CAP_PERFMON") : "missing",
                  "run as root, or grant CAP_BPF,CAP_PERFMON,CAP_SYS_RESOURCE (setcap or systemd AmbientCapabilities)"});
  rows.push_back({"kernel", (f.kernel_major > 6 || (f.kernel_major == 6 && f.kernel_minor >= 1)) ? CheckStatus::ok
                                                                                                 : CheckStatus::warn,
                  f.release, "steptrace is tested on 6.1 and newer"});
  rows.push_back({"btf", f.btf ? CheckStatus::ok : CheckStatus::fail, f.btf                                           ? f.btf_path
                  : f.btf_tried.empty() || f.btf_tried == "/sys/kernel/btf/vmlinux" ? "not found"
                                                                                     : "cannot read " + f.btf_tried,
                  "kernel built without CONFIG_DEBUG_INFO_BTF: pass --btf FILE (e.g. from btfhub for this kernel)"});
  bool locked = lockdown == "confidentiality";
  rows.push_back({"lockdown", locked ? CheckStatus::fail : CheckStatus::ok, lockdown.empty() ? "n/a" : lockdown,
                  "kernel lockdown=confidentiality forbids BPF reads of kernel memory; boot with lockdown=integrity or none"});
  rows.push_back({"ringbuf", f.ringbuf ? CheckStatus::ok : CheckStatus::fail, f.ringbuf ? "yes" : "no",
                  "BPF ring buffers need kernel >= 5.8"});
  rows.push_back({"task storage", f.task_storage ? CheckStatus::ok : CheckStatus::fail,
                  f.task_storage ? "yes" : "no", "task-local storage needs kernel >= 5.11"});
  rows.push_back({"tracefs", f.tracefs.empty() ? CheckStatus::warn : CheckStatus::ok,
                  f.tracefs.empty() ? "not mounted" : f.tracefs,
                  "mount -t tracefs nodev /sys/kernel/tracing (needed by the classic-tracepoint tier)"});
  rows.push_back({"sched/syscall hooks", f.tp_sys_enter ? CheckStatus::ok : CheckStatus::fail,
                  f.tp_sys_enter ? "tp_btf" : "missing", "needs BTF-enabled raw tracepoints (>= 5.5)"});
  // The tiers a default run would pick (loader/tiers.cpp), so `check` says what `run` will use.
  const uint32_t all = ST_SUB_SCHED | ST_SUB_BLOCK | ST_SUB_NET | ST_SUB_ACCEL;
  const TierPlan plan = plan_tiers(f, all);
  std::string net_tier, accel_tier, accel_tp;
  for (const auto& t : plan.describe(all, f)) {
    if (t.collector == "net") net_tier = t.tier;
    if (t.collector == "accel") accel_tier = t.tier;
    if (t.collector == "accel_tp") accel_tp = t.tier;
  }
  rows.push_back({"net tier", (plan.net_tp || plan.net_kprobe) ? CheckStatus::ok : CheckStatus::warn, net_tier,
                  "per-call TCP bytes need the sock_*_length tracepoints (>= 6.3) or kprobes"});
  rows.push_back({"block tier", f.tp_block_rq ? CheckStatus::ok : CheckStatus::warn,
                  f.tp_block_rq ? "tp_btf block_rq_*" : "missing", "block tracepoints missing from BTF"});
  rows.push_back({"syscall tier", f.syscall_tps ? CheckStatus::ok : CheckStatus::warn,
                  f.syscall_tps ? "per-syscall events (syscalls:sys_enter_ioctl, ...)" : "raw tp_btf sys_enter/sys_exit",
                  "without tracefs' per-syscall events (CONFIG_FTRACE_SYSCALLS) every syscall on the host runs a "
                  "program while device or socket calls are timed"});
  rows.push_back({"accel tier", f.tp_sys_enter || plan.accel_kprobe ? CheckStatus::ok : CheckStatus::fail, accel_tier,
                  "needs BTF-enabled raw tracepoints (>= 5.5), or kprobes and the neuron module's ncdev_ioctl"});
  std::string skipped;
  for (const auto& sk : f.neuron_tps_skipped) skipped += "; skipped " + sk;
  rows.push_back({"neuron tracepoints", plan.neuron_tps.empty() ? CheckStatus::warn : CheckStatus::ok,
                  accel_tp + skipped, "load the neuron driver (and mount tracefs) for its DMA/copy tracepoints"});
  rows.push_back({"kprobes", f.kprobes ? CheckStatus::ok : CheckStatus::warn, f.kprobes ? "yes" : "no",
                  "kernel without CONFIG_KPROBES: kprobe tiers unavailable, tracepoint tiers used"});
  rows.push_back({"uprobes", f.uprobes ? CheckStatus::ok : CheckStatus::warn, f.uprobes ? "yes" : "no",
                  "runtime/step-marker probes need CONFIG_UPROBES"});
  return rows;
}

bool preflight_ok(const std::vector<CheckRow>& rows) {
  for (const auto& r : rows)
    if (r.status == CheckStatus::fail) return false;
  return true;
}

std::string format_preflight(const std::vector<CheckRow>& rows) {
  std::string out = fmt::format("{:<20} {:<6} {}\n", "CHECK", "STATUS", "DETAIL");
  for (const auto& r : rows) {
    const char* st = r.status == CheckStatus::ok ? "ok" : r.status == CheckStatus::warn ? "warn" : "FAIL";
    out += fmt::format("{:<20} {:<6} {}\n", r.name, st, r.detail);
    if (r.status != CheckStatus::ok) out += fmt::format("{:<20} {:<6} -> {}\n", "", "", r.hint);
  }
  return out;
}

}  // namespace steptrace
