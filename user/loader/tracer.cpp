// SPDX-License-Identifier: Apache-2.0
#include "loader/tracer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/core.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "steptrace_bpf.skel.h"
#include "util/log.h"

namespace steptrace {

uint32_t kernel_dev_from_user(uint64_t st_dev) {
  return (static_cast<uint32_t>(major(st_dev)) << 20) | static_cast<uint32_t>(minor(st_dev));
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
  cfg.uverbs_major = settings_.uverbs_major;
  cfg.rdma_verbs = settings_.rdma_verbs ? 1 : 0;
  if (settings_.ring_wake_fill > 0 && settings_.ring_wake_fill < 1)
    cfg.ring_wake_bytes = static_cast<uint32_t>(static_cast<double>(settings_.ring_bytes) * settings_.ring_wake_fill);

  // Disable what this kernel cannot run or the user turned off; the tier
  // each collector gets is chosen in one place (loader/tiers.cpp).
  auto off = [](bpf_program* p) { bpf_program__set_autoload(p, false); };
  auto manual = [](bpf_program* p) { bpf_program__set_autoattach(p, false); };
  const uint32_t sub = settings_.subsystems;
  KernelFeatures fs = f;
  if (!settings_.syscall_events) fs.syscall_tps = false;
  plan_ = plan_tiers(fs, sub, settings_.allow_kprobes, settings_.n_accel_devs > 0, settings_.rdma_verbs);
  tiers_ = plan_.describe(sub, fs);
  cfg.socks_in_sk = plan_.socks_in_sk ? 1 : 0;
  if (auto st = size_maps(); !st) return st.error();
  if (!(sub & ST_SUB_SCHED)) {
    off(skel_->progs.st_sched_switch);
    off(skel_->progs.st_sched_wakeup);
    off(skel_->progs.st_sched_wakeup_new);
  }
  if (!f.tp_task_rename) off(skel_->progs.st_task_rename);
  // The syscall tier: per-syscall events where tracefs has them, else the
  // raw hooks; loaded with the accel collector (a kprobe tier that fails to
  // attach falls back to them) and attached by hand (attach_syscalls).
  for (auto* p : {skel_->progs.st_sys_enter, skel_->progs.st_sys_exit, skel_->progs.st_tps_enter,
                  skel_->progs.st_tps_exit}) {
    manual(p);
    const bool per_syscall = p == skel_->progs.st_tps_enter || p == skel_->progs.st_tps_exit;
    if (!plan_.syscalls_loaded || per_syscall != plan_.syscall_tps) off(p);
  }
  // Accelerator ioctls: the kprobe on the driver's handler, else the syscall hook.
  skel_->data->st_accel_in_syscalls = plan_.accel_kprobe ? 0 : 1;
  for (auto* p : {skel_->progs.st_kp_ncdev_ioctl, skel_->progs.st_kret_ncdev_ioctl}) {
    manual(p);
    if (!plan_.accel_kprobe) off(p);
  }
  // neuron:* tracepoints: only those present with the layout we read.
  struct {
    const char* event;
    bpf_program* prog;
  } const ntps[] = {{"dma_queue_copy_start", skel_->progs.st_ntp_copy_start},
                    {"dma_ack_completed", skel_->progs.st_ntp_ack_completed},
                    {"ioctl_mem_copyin", skel_->progs.st_ntp_mem_copyin},
                    {"ioctl_mem_copyout", skel_->progs.st_ntp_mem_copyout}};
  for (const auto& t : ntps) {
    manual(t.prog);
    bool want = false;
    for (const auto& n : plan_.neuron_tps) want = want || n == t.event;
    if (!want) off(t.prog);
  }
  if (!(sub & ST_SUB_BLOCK) || !f.tp_block_rq) {
    off(skel_->progs.st_block_rq_insert);
    off(skel_->progs.st_block_rq_issue);
    off(skel_->progs.st_block_rq_complete);
  }
  if (!(sub & ST_SUB_BLOCK) || !f.tp_block_rq || !f.tp_block_rq_requeue) off(skel_->progs.st_block_rq_requeue);
  if (!(sub & ST_SUB_BLOCK) || !f.tp_block_rq || !f.tp_block_rq_merge) off(skel_->progs.st_block_rq_merge);
  link_missed_ = f.link_kprobe_missed;
  if (!plan_.net_tp) {
    off(skel_->progs.st_sock_send_length);
    off(skel_->progs.st_sock_recv_length);
  }
  for (auto* p : {skel_->progs.st_kp_tcp_sendmsg, skel_->progs.st_kret_tcp_sendmsg, skel_->progs.st_kp_tcp_recvmsg,
                  skel_->progs.st_kret_tcp_recvmsg}) {
    manual(p);
    if (!plan_.net_kprobe) off(p);
  }
  if (!(sub & ST_SUB_NET) || !f.tp_tcp_retransmit) off(skel_->progs.st_tcp_retransmit_skb);
  if (!(sub & ST_SUB_NET) || !f.tp_tcp_probe) off(skel_->progs.st_tcp_probe);
  if (!(sub & ST_SUB_NET) || !f.tp_inet_sock_set_state) off(skel_->progs.st_inet_sock_set_state);
  // Host steals: interrupts need the sched collector (it sends their time
  // per slice and keeps the per-CPU current target); reclaim does not.
  const bool steal = (sub & ST_SUB_STEAL) != 0;
  if (!steal || !(sub & ST_SUB_SCHED) || !f.tp_irq)
    for (auto* p : {skel_->progs.st_irq_entry, skel_->progs.st_irq_exit, skel_->progs.st_softirq_entry,
                    skel_->progs.st_softirq_exit})
      off(p);
  if (!steal || !f.tp_direct_reclaim) {
    off(skel_->progs.st_direct_reclaim_begin);
    off(skel_->progs.st_direct_reclaim_end);
  }
  if (!steal || !f.tp_memcg_reclaim) {
    off(skel_->progs.st_memcg_reclaim_begin);
    off(skel_->progs.st_memcg_reclaim_end);
  }
  // The sampler is attached by hand to one perf event per CPU (attach_sampler).
  manual(skel_->progs.st_cpu_sample);
  if (!(sub & ST_SUB_SAMPLE) || settings_.sample_hz == 0) off(skel_->progs.st_cpu_sample);
  if ((sub & ST_SUB_SAMPLE) && settings_.sample_hz == 0)
    for (auto& t : tiers_)
      if (t.collector == "sample") t.tier = "disabled (--sample-hz 0)";
  // Uprobe programs are attached by hand (attach_uprobe), never by the skeleton.
  bpf_program__set_autoattach(skel_->progs.st_uprobe_entry, false);
  bpf_program__set_autoattach(skel_->progs.st_uprobe_return, false);
  if (!(sub & ST_SUB_UPROBE)) {
    off(skel_->progs.st_uprobe_entry);
    off(skel_->progs.st_uprobe_return);
  }
  return Ok{};
}

Status BpfTracer::size_maps() {
  if (settings_.max_targets && bpf_map__set_max_entries(skel_->maps.st_targets, settings_.max_targets))
    return make_error("cannot size the target map");
  // Socket owners live in the sockets' own storage where every net program
  // is a tp_btf one (the kprobe tier's socket is not a BTF pointer): the LRU
  // is then left at one entry.
  const uint32_t socks = plan_.socks_in_sk ? 1 : settings_.max_socks;
  if (socks && bpf_map__set_max_entries(skel_->maps.st_socks, socks)) return make_error("cannot size the socket map");
  if (bpf_map__set_max_entries(skel_->maps.st_proc_agg_map, std::max<uint32_t>(settings_.agg_processes, 1)))
    return make_error("cannot size the aggregation map");
  if (bpf_map__set_max_entries(skel_->maps.st_events, static_cast<uint32_t>(settings_.ring_bytes)))
    return make_error(fmt::format("ring buffer size {} rejected", settings_.ring_bytes));
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
  return attach_optional();
}

// The syscall tier, on the calls the plan needs now (device calls only if
// the kprobe tier does not hold them): one program per side, attached to
// each per-syscall event, or the raw hooks. A failure here is fatal: the
// collectors that asked for it would be blind.
Status BpfTracer::attach_syscalls() {
  const bool device_calls = plan_.rdma_verbs ||
                            ((settings_.subsystems & ST_SUB_ACCEL) && skel_->data->st_accel_in_syscalls);
  const auto enters = plan_.syscall_enters(device_calls), exits = plan_.syscall_exits(device_calls);
  auto keep = [this](bpf_link* l, const std::string& what) -> Status {
    if (!l) return make_error(fmt::format("cannot attach {}: {}", what, std::strerror(errno)));
    extra_links_.push_back(l);
    return Ok{};
  };
  if (plan_.syscall_tps) {
    for (const auto& e : enters)
      if (auto st = keep(bpf_program__attach_tracepoint(skel_->progs.st_tps_enter, "syscalls", e.c_str()),
                         "syscalls:" + e);
          !st)
        return st;
    for (const auto& e : exits)
      if (auto st = keep(bpf_program__attach_tracepoint(skel_->progs.st_tps_exit, "syscalls", e.c_str()),
                         "syscalls:" + e);
          !st)
        return st;
  } else {
    if (!enters.empty())
      if (auto st = keep(bpf_program__attach(skel_->progs.st_sys_enter), "tp_btf sys_enter"); !st) return st;
    if (!exits.empty())
      if (auto st = keep(bpf_program__attach(skel_->progs.st_sys_exit), "tp_btf sys_exit"); !st) return st;
  }
  for (auto& t : tiers_)
    if (t.collector == "syscalls") t.tier = plan_.syscall_tier(settings_.subsystems, device_calls);
  return Ok{};
}

// The tiers that may fail on a particular node (a function not probeable, a
// tracepoint gone with its module) are attached one by one: a failure falls
// back to the next tier and is reported, never fatal unless nothing is left.
Status BpfTracer::attach_optional() {
  auto set_tier = [this](const std::string& collector, const std::string& tier) {
    for (auto& t : tiers_)
      if (t.collector == collector) t.tier = tier;
  };
  auto link = [this](bpf_program* p) -> int {
    bpf_link* l = bpf_program__attach(p);
    if (!l) return -errno;
    extra_links_.push_back(l);
    const char* sec = bpf_program__section_name(p);
    if (std::strncmp(sec, "kretprobe/", 10) == 0) kret_links_.push_back(l);
    return 0;
  };
  if (plan_.accel_kprobe) {
    int err = link(skel_->progs.st_kp_ncdev_ioctl);
    if (!err) err = link(skel_->progs.st_kret_ncdev_ioctl);
    if (err) {
      skel_->data->st_accel_in_syscalls = 1;  // the kprobe programs now return at once
      set_tier("accel", fmt::format("{}, filtered to device files (kprobe ncdev_ioctl failed: {})",
                                    plan_.syscall_tps ? "syscalls:sys_enter/exit_ioctl" : "tp_btf sys_enter/sys_exit",
                                    std::strerror(-err)));
      log::warn("kprobe on ncdev_ioctl failed ({}): accelerator ioctls via the syscall hook", std::strerror(-err));
    }
  }
  if (auto st = attach_syscalls(); !st) return st;
  if (plan_.net_kprobe) {
    int err = 0;
    for (auto* p : {skel_->progs.st_kp_tcp_sendmsg, skel_->progs.st_kret_tcp_sendmsg,
                    skel_->progs.st_kp_tcp_recvmsg, skel_->progs.st_kret_tcp_recvmsg})
      if (!err) err = link(p);
    if (err) {
      set_tier("net", fmt::format("tcp state/retransmit only (kprobe tcp_sendmsg/tcp_recvmsg failed: {})",
                                  std::strerror(-err)));
      log::warn("kprobes on tcp_sendmsg/tcp_recvmsg failed ({}): no per-call TCP bytes", std::strerror(-err));
    }
  }
  std::string tps, failed;
  for (auto* p : {skel_->progs.st_ntp_copy_start, skel_->progs.st_ntp_ack_completed, skel_->progs.st_ntp_mem_copyin,
                  skel_->progs.st_ntp_mem_copyout}) {
    if (!bpf_program__autoload(p)) continue;
    const char* sec = bpf_program__section_name(p);  // "tracepoint/neuron/<event>"
    std::string ev = std::strrchr(sec, '/') ? std::strrchr(sec, '/') + 1 : sec;
    if (int err = link(p); err) failed += fmt::format(" {}: {};", ev, std::strerror(-err));
    else tps += (tps.empty() ? "neuron:" : ",") + ev;
  }
  if (bpf_program__autoload(skel_->progs.st_cpu_sample)) set_tier("sample", attach_sampler());
  if (!failed.empty()) {
    set_tier("accel_tp", (tps.empty() ? std::string("none") : tps) + " (attach failed:" + failed + ")");
    log::warn("neuron tracepoints not attached:{}", failed);
  }
  return Ok{};
}

// One CPU-clock perf event per online CPU, sampling every task at
// sample_hz, each running st_cpu_sample (which keeps only targets). A CPU
// that is offline (ENODEV) is skipped; the tier says how many were covered.
std::string BpfTracer::attach_sampler() {
  const int ncpu = libbpf_num_possible_cpus();
  int attached = 0, first_err = 0;
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = settings_.sample_hz;
    const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno != ENODEV && !first_err) first_err = errno;
      continue;
    }
    bpf_link* l = bpf_program__attach_perf_event(skel_->progs.st_cpu_sample, fd);
    if (!l) {
      if (!first_err) first_err = errno;
      ::close(fd);
      continue;
    }
    extra_links_.push_back(l);  // destroying the link closes the event
    ++attached;
  }
  if (attached == 0) {
    log::warn("stack sampler not attached: {}", std::strerror(first_err ? first_err : ENODEV));
    return fmt::format("unavailable: perf_event_open cpu-clock failed ({})",
                       std::strerror(first_err ? first_err : ENODEV));
  }
  return fmt::format("perf_event cpu-clock {} Hz on {} CPU(s), user (frame pointers) and kernel stacks",
                     settings_.sample_hz, attached);
}

void BpfTracer::set_python(uint32_t tgid, const st_py_proc* layout) {
  if (!bpf_program__autoload(skel_->progs.st_cpu_sample)) return;
  if (layout)
    (void)bpf_map__update_elem(skel_->maps.st_py_procs, &tgid, sizeof(tgid), layout, sizeof(*layout), BPF_ANY);
  else
    (void)bpf_map__delete_elem(skel_->maps.st_py_procs, &tgid, sizeof(tgid), 0);
}

Status BpfTracer::add_target(uint32_t tgid, int* err_no) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.st_targets, &tgid, sizeof(tgid), &one, sizeof(one), BPF_ANY)) {
    int e = errno;
    if (err_no) *err_no = e;
    return make_error(fmt::format("cannot add pid {} to the target set: {}", tgid,
                                  e == E2BIG ? "the target map is full" : std::strerror(e)));
  }
  // The programs test the bit (common.bpf.h, st_target_bits); an atomic or,
  // as a fork on another CPU may set a bit of the same word meanwhile.
  __atomic_fetch_or(&skel_->bss->st_target_bits[(tgid >> 6) & (ST_TARGET_BITS_WORDS - 1)], 1ull << (tgid & 63),
                    __ATOMIC_SEQ_CST);
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

void BpfTracer::set_consumer_idle(bool idle) { skel_->bss->st_consumer_idle = idle ? 1 : 0; }

bool BpfTracer::rearm_fill_wakeup() {
  // Read first: the line stays clean (shared with every producing CPU) in
  // the common case, a drain that nothing woke.
  volatile uint32_t* woken = &skel_->bss->st_consumer_woken;
  if (*woken == 0) return false;
  *woken = 0;
  return true;
}

void BpfTracer::arm_exec_wakeup() {
  volatile uint32_t* armed = &skel_->bss->st_exec_wake;
  if (*armed == 0) *armed = 1;
}

void BpfTracer::set_detail(bool on) { skel_->data->st_detail = on ? 1 : 0; }

void BpfTracer::set_aggregate(bool on) {
  // The map has one entry when aggregation was not sized: it would only thrash.
  skel_->bss->st_aggregate = on && settings_.agg_processes > 0 ? 1 : 0;
}

int BpfTracer::ring_map_fd() const { return bpf_map__fd(skel_->maps.st_events); }

}  // namespace steptrace
