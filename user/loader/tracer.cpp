// SPDX-License-Identifier: Apache-2.0
#include "loader/tracer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/core.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "steptrace_bpf.skel.h"
#include "util/log.h"

namespace steptrace {

uint32_t kernel_dev_from_user(uint64_t st_dev) {
  return (static_cast<uint32_t>(major(st_dev)) << 20) | static_cast<uint32_t>(minor(st_dev));
}

uint64_t DropStats::total_emitted() const {
  uint64_t t = 0;
  for (auto v : emitted) t += v;
  return t;
}
uint64_t DropStats::total_dropped() const {
  uint64_t t = 0;
  for (auto v : dropped) t += v;
  return t;
}

void BpfTracer::SkelDeleter::operator()(steptrace_bpf* s) const { steptrace_bpf__destroy(s); }

BpfTracer::~BpfTracer() {
  for (auto* l : extra_links_) bpf_link__destroy(l);
}

Result<std::unique_ptr<BpfTracer>> BpfTracer::create(const TracerSettings& s, const KernelFeatures& f) {
  std::unique_ptr<BpfTracer> t(new BpfTracer());
  t->settings_ = s;
  if (auto st = t->open_and_configure(f); !st) return st.error();
  if (auto st = t->load(); !st) return st.error();
  if (auto st = t->attach(); !st) return st.error();
  return t;
}

Status BpfTracer::open_and_configure(const KernelFeatures& f) {
  LIBBPF_OPTS(bpf_object_open_opts, opts);
  if (!settings_.btf_path.empty()) opts.btf_custom_path = settings_.btf_path.c_str();
  steptrace_bpf* raw = steptrace_bpf__open_opts(&opts);
  if (!raw) return make_error(fmt::format("cannot open the BPF object: {}", std::strerror(errno)));
  skel_.reset(raw);

  auto& cfg = skel_->rodata->st_cfg;
  cfg.filter_mode = settings_.filter_mode;
  cfg.follow_forks = settings_.follow_forks ? 1 : 0;
  cfg.cgroup_id = settings_.cgroup_id;
  cfg.enabled = settings_.subsystems;
  cfg.self_tgid = settings_.self_tgid ? settings_.self_tgid : static_cast<uint32_t>(::getpid());
  cfg.neuron_major = settings_.neuron_major;
  cfg.n_accel_devs = settings_.n_accel_devs;

  if (bpf_map__set_max_entries(skel_->maps.st_events, static_cast<uint32_t>(settings_.ring_bytes)))
    return make_error(fmt::format("ring buffer size {} rejected", settings_.ring_bytes));

  // Disable what this kernel cannot run or the user turned off; say which tier each collector got.
  auto off = [](bpf_program* p) { bpf_program__set_autoload(p, false); };
  const uint32_t sub = settings_.subsystems;
  bool need_syscalls = sub & (ST_SUB_SCHED | ST_SUB_ACCEL | ST_SUB_NET);
  if (!(sub & ST_SUB_SCHED)) {
    off(skel_->progs.st_sched_switch);
    off(skel_->progs.st_sched_wakeup);
    off(skel_->progs.st_sched_wakeup_new);
    tiers_.push_back({"sched", "disabled"});
  } else {
    tiers_.push_back({"sched", "tp_btf sched_switch/sched_wakeup"});
  }
  if (!f.tp_task_rename) off(skel_->progs.st_task_rename);
  if (!need_syscalls) {
    off(skel_->progs.st_sys_enter);
    off(skel_->progs.st_sys_exit);
  }
  tiers_.push_back({"accel", (sub & ST_SUB_ACCEL) ? "tp_btf sys_enter/sys_exit, filtered to device files"
                                                  : "disabled"});
  if (!(sub & ST_SUB_BLOCK) || !f.tp_block_rq) {
    off(skel_->progs.st_block_rq_insert);
    off(skel_->progs.st_block_rq_issue);
    off(skel_->progs.st_block_rq_complete);
    tiers_.push_back({"block", (sub & ST_SUB_BLOCK) ? "unavailable: no block_rq tracepoints" : "disabled"});
  } else {
    tiers_.push_back({"block", "tp_btf block_rq_insert/issue/complete"});
  }
  if (!(sub & ST_SUB_NET)) {
    off(skel_->progs.st_sock_send_length);
    off(skel_->progs.st_sock_recv_length);
    off(skel_->progs.st_tcp_retransmit_skb);
    off(skel_->progs.st_inet_sock_set_state);
    tiers_.push_back({"net", "disabled"});
  } else {
    if (!f.tp_sock_length) {
      off(skel_->progs.st_sock_send_length);
      off(skel_->progs.st_sock_recv_length);
    }
    if (!f.tp_tcp_retransmit) off(skel_->progs.st_tcp_retransmit_skb);
    if (!f.tp_inet_sock_set_state) off(skel_->progs.st_inet_sock_set_state);
    tiers_.push_back({"net", f.tp_sock_length ? "tp_btf sock_send_length/sock_recv_length + tcp state"
                                              : "tcp state/retransmit only (no per-call bytes on this kernel)"});
  }
  // Uprobe programs are attached by hand (attach_uprobe), never by the skeleton.
  bpf_program__set_autoattach(skel_->progs.st_uprobe_entry, false);
  bpf_program__set_autoattach(skel_->progs.st_uprobe_return, false);
  if (!(sub & ST_SUB_UPROBE)) {
    off(skel_->progs.st_uprobe_entry);
    off(skel_->progs.st_uprobe_return);
  }
  return Ok{};
}

Status BpfTracer::load() {
  int err = steptrace_bpf__load(skel_.get());
  if (err) {
    return make_error(fmt::format("the kernel refused the BPF programs ({}); run with -vv for the verifier log",
                                  std::strerror(-err)));
  }
  return Ok{};
}

Status BpfTracer::attach() {
  int err = steptrace_bpf__attach(skel_.get());
  if (err) return make_error(fmt::format("cannot attach the BPF programs: {}", std::strerror(-err)));
  return Ok{};
}

Status BpfTracer::add_target(uint32_t tgid) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.st_targets, &tgid, sizeof(tgid), &one, sizeof(one), BPF_ANY))
    return make_error(fmt::format("cannot add pid {} to the target set: {}", tgid, std::strerror(errno)));
  return Ok{};
}

Status BpfTracer::add_accel_dev(uint32_t kernel_dev, uint64_t ino, uint32_t index) {
  st_accel_dev_key key{};
  key.dev = kernel_dev;
  key.ino = ino;
  if (bpf_map__update_elem(skel_->maps.st_accel_devs, &key, sizeof(key), &index, sizeof(index), BPF_ANY))
    return make_error(fmt::format("cannot register accelerator device: {}", std::strerror(errno)));
  return Ok{};
}

Status BpfTracer::attach_uprobe(const std::string& binary, const std::string& func, uint32_t probe_id, bool ret) {
  LIBBPF_OPTS(bpf_uprobe_opts, uo);
  uo.func_name = func.c_str();
  uo.retprobe = ret;
  uo.bpf_cookie = probe_id;
  bpf_program* prog = ret ? skel_->progs.st_uprobe_return : skel_->progs.st_uprobe_entry;
  bpf_link* link = bpf_program__attach_uprobe_opts(prog, -1, binary.c_str(), 0, &uo);
  if (!link)
    return make_error(fmt::format("cannot attach uprobe {}:{}: {}", binary, func, std::strerror(errno)));
  extra_links_.push_back(link);
  return Ok{};
}

int BpfTracer::ring_map_fd() const { return bpf_map__fd(skel_->maps.st_events); }

Result<DropStats> BpfTracer::read_stats() const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return make_error("cannot count CPUs");
  std::vector<st_stats> per_cpu(static_cast<size_t>(ncpu));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(skel_->maps.st_stats_map, &zero, sizeof(zero), per_cpu.data(),
                           per_cpu.size() * sizeof(st_stats), 0))
    return make_error(fmt::format("cannot read drop counters: {}", std::strerror(errno)));
  DropStats d;
  for (const auto& c : per_cpu) {
    for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
      d.emitted[k] += c.emitted[k];
      d.dropped[k] += c.dropped[k];
    }
  }
  return d;
}

}  // namespace steptrace
