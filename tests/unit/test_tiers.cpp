// SPDX-License-Identifier: Apache-2.0
// Attach-tier choice per kernel, and the kernel-text parsers it rests on
// (/proc/kallsyms lines, tracefs format files).
#include <catch2/catch.hpp>

#include "loader/kernel_text.h"
#include "loader/preflight.h"
#include "loader/tiers.h"
#include "steptrace_abi.h"

using namespace steptrace;

namespace {

constexpr uint32_t kAll = ST_SUB_SCHED | ST_SUB_BLOCK | ST_SUB_NET | ST_SUB_ACCEL | ST_SUB_UPROBE;

// This build machine: 6.18, no kprobes, sock_*_length present.
KernelFeatures k618() {
  KernelFeatures f;
  f.release = "6.18.0";
  f.btf = f.ringbuf = f.task_storage = f.tp_sys_enter = f.tp_block_rq = true;
  f.tp_sock_length = f.tp_inet_sock_set_state = f.tp_tcp_retransmit = true;
  f.tracefs = "/sys/kernel/tracing";
  return f;
}
// Debian 6.1: kprobes, no sock_*_length.
KernelFeatures k61() {
  KernelFeatures f = k618();
  f.release = "6.1.0-57-amd64";
  f.tp_sock_length = false;
  f.kprobes = f.kprobe_tcp = true;
  return f;
}

std::string tier(const TierPlan& p, const KernelFeatures& f, const std::string& c, uint32_t sub = kAll) {
  for (const auto& t : p.describe(sub, f))
    if (t.collector == c) return t.tier;
  return "<none>";
}

}  // namespace

TEST_CASE("tiers: 6.18 without kprobes uses tracepoints everywhere", "[tiers]") {
  auto f = k618();
  auto p = plan_tiers(f, kAll);
  CHECK(p.syscalls);
  CHECK(p.syscall_exit);  // accel ioctls are emitted at the exit
  CHECK(tier(p, f, "syscalls").find("tp_btf sys_enter/sys_exit (") == 0);
  CHECK_FALSE(p.accel_kprobe);
  CHECK(p.net_tp);
  CHECK_FALSE(p.net_kprobe);
  CHECK(tier(p, f, "net").find("sock_send_length") != std::string::npos);
  // every net program a tp_btf one: socket owners in the sockets' own storage
  CHECK(p.socks_in_sk);
  CHECK(tier(p, f, "net").find("socket owners in sk storage") != std::string::npos);
  CHECK(tier(p, f, "accel").find("sys_enter") != std::string::npos);
  CHECK(tier(p, f, "accel_tp").find("none") == 0);
}

TEST_CASE("tiers: 6.1 takes per-call TCP bytes from kprobes on tcp_sendmsg/tcp_recvmsg", "[tiers]") {
  auto f = k61();
  auto p = plan_tiers(f, kAll);
  CHECK_FALSE(p.net_tp);
  CHECK(p.net_kprobe);
  CHECK(tier(p, f, "net").find("kprobe/kretprobe tcp_sendmsg") == 0);
  // a kprobe's socket is no BTF pointer: owners stay in the LRU
  CHECK_FALSE(p.socks_in_sk);
  CHECK(tier(p, f, "net").find("sk storage") == std::string::npos);
  // --no-kprobes: no per-call bytes on 6.1, said so.
  auto q = plan_tiers(f, kAll, false);
  CHECK_FALSE(q.net_kprobe);
  CHECK(tier(q, f, "net").find("no per-call bytes") != std::string::npos);
  CHECK(q.socks_in_sk);  // tcp state only: tp_btf programs alone
  // kprobes but tcp_sendmsg not in kallsyms (renamed, inlined): no kprobe tier
  f.kprobe_tcp = false;
  CHECK_FALSE(plan_tiers(f, kAll).net_kprobe);
}

TEST_CASE("tiers: the neuron module's ncdev_ioctl replaces the syscall hook for accel ioctls", "[tiers]") {
  auto f = k61();
  f.neuron_ioctl_sym = true;
  f.neuron_tps = {"dma_queue_copy_start", "ioctl_mem_copyin"};
  auto p = plan_tiers(f, kAll);
  CHECK(p.accel_kprobe);
  // sched counts yields at the switch-out and net is on kprobes here: no
  // syscall hook at all, every syscall on the host is spared it
  CHECK_FALSE(p.syscalls);
  CHECK_FALSE(p.syscall_exit);
  CHECK(p.syscalls_loaded);  // loaded for a fallback if the kprobe fails to attach
  CHECK(tier(p, f, "syscalls").find("not attached") == 0);
  CHECK(tier(p, f, "accel") == "kprobe/kretprobe ncdev_ioctl [neuron]");
  CHECK(tier(p, f, "accel_tp") == "neuron:dma_queue_copy_start,ioctl_mem_copyin");
  CHECK(tier(p, f, "syscalls").find("accel") == std::string::npos);
  // accel (+net via kprobes) alone: no syscall hook at all, so no tax on other syscalls
  auto q = plan_tiers(f, ST_SUB_ACCEL | ST_SUB_NET);
  CHECK_FALSE(q.syscalls);
  CHECK(tier(q, f, "syscalls", ST_SUB_ACCEL | ST_SUB_NET).find("not attached") == 0);
  // --accel-dev files (any file, e.g. a simulated device) are only seen at the syscall boundary
  auto d = plan_tiers(f, kAll, true, true);
  CHECK_FALSE(d.accel_kprobe);
  CHECK(d.syscalls);
  CHECK(tier(d, f, "accel").find("(--accel-dev given)") != std::string::npos);
  // without kprobes the same kernel falls back to the syscall hook
  f.kprobes = false;
  auto r = plan_tiers(f, ST_SUB_ACCEL);
  CHECK_FALSE(r.accel_kprobe);
  CHECK(r.syscalls);
  CHECK(r.syscall_exit);
  // sched alone: no syscall hook (yields are counted at the switch-out)
  auto s = plan_tiers(f, ST_SUB_SCHED);
  CHECK_FALSE(s.syscalls);
  CHECK_FALSE(s.syscalls_loaded);
  // a tracepoint tier needs tracefs
  f.tracefs.clear();
  CHECK(plan_tiers(f, kAll).neuron_tps.empty());
  // accel disabled: no neuron tracepoints either
  f.tracefs = "/sys/kernel/tracing";
  CHECK(plan_tiers(f, ST_SUB_SCHED).neuron_tps.empty());
}

TEST_CASE("tiers: steptrace check reports the tiers a run would use", "[tiers]") {
  auto f = k61();
  f.neuron_ioctl_sym = true;
  Capabilities caps;
  caps.sys_admin = true;
  auto rows = run_preflight(f, caps, "none");
  bool net = false, accel = false;
  for (const auto& r : rows) {
    if (r.name == "net tier") net = r.detail.find("kprobe/kretprobe tcp_sendmsg") == 0 && r.status == CheckStatus::ok;
    if (r.name == "accel tier") accel = r.detail.find("ncdev_ioctl") != std::string::npos;
  }
  CHECK(net);
  CHECK(accel);
  CHECK(preflight_ok(rows));
  // the syscall tier: a warning (not a failure) where the per-syscall events are missing
  auto syscall_row = [](const std::vector<CheckRow>& rs) {
    for (const auto& r : rs)
      if (r.name == "syscall tier") return r;
    return CheckRow{};
  };
  CHECK(syscall_row(rows).status == CheckStatus::warn);
  CHECK(syscall_row(rows).detail == "raw tp_btf sys_enter/sys_exit");
  f.syscall_tps = true;
  rows = run_preflight(f, caps, "none");
  CHECK(syscall_row(rows).status == CheckStatus::ok);
  CHECK(syscall_row(rows).detail.find("per-syscall events") == 0);
  CHECK(preflight_ok(rows));
}

TEST_CASE("kallsyms: lines parse, module symbols are told apart from the kernel's", "[parsers]") {
  auto e = parse_kallsyms_line("ffffffffc0a01230 t ncdev_ioctl\t[neuron]");
  REQUIRE(e);
  CHECK(e->name == "ncdev_ioctl");
  CHECK(e->module == "neuron");
  CHECK(e->type == 't');
  e = parse_kallsyms_line("0000000000000000 T tcp_sendmsg");
  REQUIRE(e);
  CHECK(e->module.empty());
  CHECK_FALSE(parse_kallsyms_line(""));
  CHECK_FALSE(parse_kallsyms_line("zz T x"));
  CHECK_FALSE(parse_kallsyms_line("ffff T"));
  CHECK_FALSE(parse_kallsyms_line("ffff T name junk"));
  const std::string text =
      "ffffffff81000000 T _stext\n"
      "ffffffff81a00000 T tcp_sendmsg\n"
      "ffffffff81a00100 d ncdev_ioctl\n"  // data symbol of the same name: not a function
      "ffffffffc0001000 t ncdev_ioctl\t[other]\n"
      "ffffffffc0002000 t ncdev_ioctl\t[neuron]";  // no trailing newline
  CHECK(kallsyms_has(text, "tcp_sendmsg"));
  CHECK_FALSE(kallsyms_has(text, "tcp_recvmsg"));
  CHECK(kallsyms_has(text, "ncdev_ioctl", "neuron"));
  CHECK_FALSE(kallsyms_has(text, "ncdev_ioctl", "neuronx"));
  CHECK_FALSE(kallsyms_has("ffffffff81a00100 d ncdev_ioctl\t[neuron]\n", "ncdev_ioctl", "neuron"));
}

TEST_CASE("tracefs format: fields parse and the neuron layouts are checked", "[parsers]") {
  const std::string copyin =
      "name: ioctl_mem_copyin\nID: 1234\nformat:\n"
      "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
      "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
      "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
      "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
      "\tfield:u32 device_index;\toffset:8;\tsize:4;\tsigned:0;\n"
      "\tfield:struct mem_chunk * mc;\toffset:16;\tsize:8;\tsigned:0;\n"
      "\tfield:void * buffer;\toffset:24;\tsize:8;\tsigned:0;\n"
      "\tfield:u32 offset;\toffset:32;\tsize:4;\tsigned:0;\n"
      "\tfield:u32 size;\toffset:36;\tsize:4;\tsigned:0;\n\n"
      "print fmt: \"nd%u mc %p buffer %p (%u bytes)\", REC->device_index\n";
  auto fields = parse_tp_format(copyin);
  REQUIRE(fields.size() == 9);
  CHECK(fields[5].name == "mc");
  CHECK(fields[5].offset == 16);
  CHECK(fields[8].name == "size");
  const NeuronTp* spec = nullptr;
  for (const auto& t : neuron_tracepoints())
    if (t.event == "ioctl_mem_copyin") spec = &t;
  REQUIRE(spec);
  CHECK(tp_layout_mismatch(fields, spec->fields).empty());
  // a driver that moved `size` is skipped, with the reason
  std::string moved = copyin;
  moved.replace(moved.find("offset:36"), 9, "offset:40");
  CHECK(tp_layout_mismatch(parse_tp_format(moved), spec->fields) == "field size at offset 40 size 4, expected 36 size 4");
  CHECK(tp_layout_mismatch(parse_tp_format("format:\n"), spec->fields) == "no field device_index");
  // arrays and garbage
  auto arr = parse_tp_format("\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
                             "\tfield:u32 x;\toffset:abc;\tsize:4;\n\tfield:;\toffset:1;\tsize:1;\n");
  REQUIRE(arr.size() == 1);
  CHECK(arr[0].name == "comm");
  CHECK(arr[0].size == 16);
}

TEST_CASE("features: the kernel's BTF tells whether kprobe links report their misses (6.7 and later)", "[tiers]") {
  // Reads /sys/kernel/btf/vmlinux (world-readable); the answer follows the
  // running kernel: bpf_link_info.perf_event.kprobe.missed came in 6.7.
  KernelFeatures f = probe_features("");
  REQUIRE(f.btf);
  INFO("kernel " << f.release);
  const bool new_enough = f.kernel_major > 6 || (f.kernel_major == 6 && f.kernel_minor >= 7);
  CHECK(f.link_kprobe_missed == new_enough);
  CHECK(f.tp_block_rq_merge);
  CHECK(f.tp_block_rq_requeue);
  // A BTF file that is not the kernel's has no such member: not measurable, never a guess.
  KernelFeatures none = probe_features("/nonexistent/btf");
  CHECK_FALSE(none.link_kprobe_missed);
}

TEST_CASE("tiers: per-syscall events replace the raw syscall hooks where tracefs has them", "[tiers]") {
  auto f = k61();
  f.tp_sock_length = true;  // net call durations need entry stamps
  // without the events: the raw hooks
  auto raw = plan_tiers(f, kAll, false, true);
  CHECK_FALSE(raw.syscall_tps);
  CHECK(tier(raw, f, "syscalls").find("tp_btf sys_enter/sys_exit (accel ioctls, net call durations)") == 0);
  f.syscall_tps = true;
  auto p = plan_tiers(f, kAll, false, true);
  CHECK(p.syscall_tps);
  CHECK(tier(p, f, "syscalls") ==
        "syscalls:sys_enter_{ioctl,write,read,readv,writev,sendto,recvfrom,sendmsg,recvmsg,sendmmsg,recvmmsg} + "
        "sys_exit_ioctl (accel ioctls, net call durations)");
  CHECK(tier(p, f, "accel") == "syscalls:sys_enter/exit_ioctl, filtered to device files (--accel-dev given)");
  // device calls only: the ioctl events alone; the exit only for device calls
  auto a = plan_tiers(f, ST_SUB_ACCEL, false, true);
  CHECK(a.syscall_enters(true) == std::vector<std::string>{"sys_enter_ioctl"});
  CHECK(a.syscall_exits(true) == std::vector<std::string>{"sys_exit_ioctl"});
  CHECK(a.syscall_exits(false).empty());
  // uverbs calls come through write too
  auto v = plan_tiers(f, ST_SUB_ACCEL, false, true, true);
  CHECK(v.syscall_enters(true) == std::vector<std::string>{"sys_enter_ioctl", "sys_enter_write"});
  CHECK(v.syscall_exits(true) == std::vector<std::string>{"sys_exit_ioctl", "sys_exit_write"});
  CHECK(tier(v, f, "efa_ctl", ST_SUB_ACCEL).find("syscalls:sys_enter/exit_{ioctl,write}") == 0);
  // sched alone: nothing to hook, whatever the kernel offers
  auto s = plan_tiers(f, ST_SUB_SCHED);
  CHECK_FALSE(s.syscalls);
  CHECK(s.syscall_enters(false).empty());
  CHECK(tier(s, f, "syscalls", ST_SUB_SCHED).find("not attached") == 0);
}
