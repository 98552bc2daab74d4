// SPDX-License-Identifier: Apache-2.0
#include "loader/features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>

#include "loader/kernel_text.h"
#include "util/sys_root.h"

namespace steptrace {
namespace {

bool path_exists(const char* p) { return ::access(p, F_OK) == 0; }

bool btf_has_tracepoint(const struct btf* btf, const char* name) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "btf_trace_%s", name);
  return btf__find_by_name_kind(btf, buf, BTF_KIND_TYPEDEF) > 0;
}

// Member `name` of struct/union type `id`, looking through anonymous
// members; the member's type id (modifiers skipped), or 0.
int btf_member_type(const struct btf* btf, int id, const char* name, int depth = 0) {
  const struct btf_type* t = btf__type_by_id(btf, static_cast<__u32>(id));
  if (!t || depth > 4 || (!btf_is_struct(t) && !btf_is_union(t))) return 0;
  const struct btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); ++i, ++m) {
    const char* n = btf__name_by_offset(btf, m->name_off);
    int mt = btf__resolve_type(btf, m->type);
    if (mt < 0) continue;
    if (n && std::strcmp(n, name) == 0) return mt;
    if ((!n || !*n) && mt > 0)
      if (int r = btf_member_type(btf, mt, name, depth + 1); r > 0) return r;
  }
  return 0;
}

// Does `struct root` have the member path `path` (anonymous members looked through)?
bool btf_has_member_path(const struct btf* btf, const char* root, std::initializer_list<const char*> path) {
  int id = btf__find_by_name_kind(btf, root, BTF_KIND_STRUCT);
  for (const char* p : path) {
    if (id <= 0) return false;
    id = btf_member_type(btf, id, p);
  }
  return id > 0;
}

}  // namespace

// Every per-syscall event the syscall tier may attach to, with ftrace's
// layout: the number at 8, the arguments (8 bytes each) or the return at 16.
static bool syscall_events_usable(const std::string& tracefs) {
  const std::vector<TpExpect> enter = {{"__syscall_nr", 8, 4}}, exit = {{"__syscall_nr", 8, 4}, {"ret", 16, 8}};
  for (const char* call : {"ioctl", "write", "read", "readv", "writev", "sendto", "recvfrom", "sendmsg", "recvmsg",
                           "sendmmsg", "recvmmsg"}) {
    auto fmt = read_small_file(tracefs + "/events/syscalls/sys_enter_" + call + "/format", 64 << 10);
    if (!fmt) return false;
    const auto fields = parse_tp_format(*fmt);
    if (!tp_layout_mismatch(fields, enter).empty()) return false;
    bool arg0 = false;
    for (const auto& fl : fields) arg0 = arg0 || (fl.offset == 16 && fl.size == 8);
    if (!arg0) return false;
  }
  for (const char* call : {"ioctl", "write"}) {
    auto fmt = read_small_file(tracefs + "/events/syscalls/sys_exit_" + call + "/format", 64 << 10);
    if (!fmt || !tp_layout_mismatch(parse_tp_format(*fmt), exit).empty()) return false;
  }
  return true;
}

KernelFeatures probe_features(const std::string& btf_override) {
  KernelFeatures f;
  struct utsname u {};
  if (::uname(&u) == 0) {
    f.release = u.release;
    std::sscanf(u.release, "%d.%d", &f.kernel_major, &f.kernel_minor);
  }
  f.btf_path = btf_override.empty() ? "/sys/kernel/btf/vmlinux" : btf_override;
  struct btf* btf = btf__parse(f.btf_path.c_str(), nullptr);
  if (btf) {
    f.btf = true;
    f.tp_sock_length = btf_has_tracepoint(btf, "sock_send_length") && btf_has_tracepoint(btf, "sock_recv_length");
    f.tp_task_rename = btf_has_tracepoint(btf, "task_rename");
    f.tp_block_rq = btf_has_tracepoint(btf, "block_rq_issue") && btf_has_tracepoint(btf, "block_rq_complete");
    f.tp_block_rq_requeue = btf_has_tracepoint(btf, "block_rq_requeue");
    f.tp_block_rq_merge = btf_has_tracepoint(btf, "block_rq_merge");
    f.link_kprobe_missed = btf_has_member_path(btf, "bpf_link_info", {"perf_event", "kprobe", "missed"});
    f.tp_inet_sock_set_state = btf_has_tracepoint(btf, "inet_sock_set_state");
    f.tp_tcp_retransmit = btf_has_tracepoint(btf, "tcp_retransmit_skb");
    f.tp_tcp_probe = btf_has_tracepoint(btf, "tcp_probe");
    f.tp_sys_enter = btf_has_tracepoint(btf, "sys_enter");
    f.tp_irq = btf_has_tracepoint(btf, "irq_handler_entry") && btf_has_tracepoint(btf, "irq_handler_exit") &&
               btf_has_tracepoint(btf, "softirq_entry") && btf_has_tracepoint(btf, "softirq_exit");
    f.tp_direct_reclaim = btf_has_tracepoint(btf, "mm_vmscan_direct_reclaim_begin") &&
                          btf_has_tracepoint(btf, "mm_vmscan_direct_reclaim_end");
    f.tp_memcg_reclaim = btf_has_tracepoint(btf, "mm_vmscan_memcg_reclaim_begin") &&
                         btf_has_tracepoint(btf, "mm_vmscan_memcg_reclaim_end");
    // Kprobe-tier targets of the net collector: functions the kernel's BTF knows (not inlined).
    f.kprobe_tcp = btf__find_by_name_kind(btf, "tcp_sendmsg", BTF_KIND_FUNC) > 0 &&
                   btf__find_by_name_kind(btf, "tcp_recvmsg", BTF_KIND_FUNC) > 0;
    btf__free(btf);
  } else {
    f.btf_tried = f.btf_path;
    f.btf_path.clear();
  }
  f.ringbuf = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr) == 1;
  f.task_storage = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, nullptr) == 1;
  f.kprobes = path_exists("/sys/bus/event_source/devices/kprobe");
  f.uprobes = path_exists("/sys/bus/event_source/devices/uprobe");
  if (path_exists("/sys/kernel/tracing/events"))
    f.tracefs = "/sys/kernel/tracing";
  else if (path_exists("/sys/kernel/debug/tracing/events"))
    f.tracefs = "/sys/kernel/debug/tracing";
  // The neuron module's ioctl handler (no module BTF: kallsyms). One pass over
  // kallsyms (several MB, slow under emulation), only when the module is loaded.
  if (f.kprobes && path_exists("/sys/module/neuron")) {
    std::ifstream ks("/proc/kallsyms");
    for (std::string line; std::getline(ks, line);) {
      if (line.find("[neuron]") == std::string::npos) continue;
      auto e = parse_kallsyms_line(line);
      if (e && (e->type == 't' || e->type == 'T') && e->module == "neuron" && e->name == "ncdev_ioctl") {
        f.neuron_ioctl_sym = true;
        break;
      }
    }
  }
  if (!f.tracefs.empty()) {
    for (const auto& tp : neuron_tracepoints()) {
      auto fmt = read_small_file(f.tracefs + "/events/neuron/" + std::string(tp.event) + "/format", 64 << 10);
      if (!fmt) continue;
      auto why = tp_layout_mismatch(parse_tp_format(*fmt), tp.fields);
      if (why.empty()) f.neuron_tps.emplace_back(tp.event);
      else f.neuron_tps_skipped.push_back(std::string(tp.event) + ": " + why);
    }
  }
  if (!f.tracefs.empty()) f.syscall_tps = syscall_events_usable(f.tracefs);
  return f;
}

}  // namespace steptrace
