// SPDX-License-Identifier: Apache-2.0
// The BPF side's life cycle, RAII around the one skeleton:
//   open -> write rodata and map sizes -> disable programs this kernel
//   cannot run -> load -> attach.
// Destruction detaches and frees everything (links, maps, programs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "capture/drop_stats.h"  // DropStats: what read_stats() returns
#include "loader/features.h"
#include "loader/tiers.h"  // AttachTier, TierPlan
#include "steptrace_abi.h"
#include "util/result.h"

struct steptrace_bpf;
struct bpf_link;

namespace steptrace {

struct TracerSettings {
  uint32_t filter_mode = ST_FILTER_TGID;
  uint64_t cgroup_id = 0;
  bool follow_forks = true;
  uint32_t subsystems = ST_SUB_SCHED | ST_SUB_BLOCK | ST_SUB_NET | ST_SUB_ACCEL | ST_SUB_UPROBE | ST_SUB_STEAL;
  uint32_t self_tgid = 0;
  uint32_t neuron_major = 0;
  uint32_t n_accel_devs = 0;       // how many --accel-dev / --rdma-dev entries may be added later
  uint32_t uverbs_major = 0;       // "infiniband_verbs" char major, 0 = none
  bool rdma_verbs = false;         // decode uverbs calls (EFA control path)
  uint64_t ring_bytes = 16ull << 20;
  // Wake the consumer when the ring is this full (a fraction, 0 = never): for
  // a consumer that sleeps on the ring's fd between timed drains (sessions).
  double ring_wake_fill = 0;
  std::string btf_path;            // custom BTF for CO-RE ("" = kernel's)
  bool allow_kprobes = true;       // false: tracepoint tiers only (--no-kprobes)
  bool syscall_events = true;      // false: the raw syscall hooks even where per-syscall events exist
  // Entries of the per-process aggregation map (set_aggregate); 0: aggregation
  // is never used, the map gets one entry (it is preallocated per CPU).
  uint32_t agg_processes = 0;
  // Entries of the target set (st_targets); 0 = ST_MAX_TARGETS. Tests shrink
  // it to fill it with a few processes.
  uint32_t max_targets = 0;
  // Entries of the socket owner LRU (st_socks); 0 = ST_MAX_SOCKS. Tests shrink it to make it evict.
  uint32_t max_socks = 0;
  // ST_SUB_SAMPLE: on-CPU stack samples per CPU per second (a CPU-clock perf
  // event, so it works on VMs without a PMU); 0 turns the sampler off.
  uint32_t sample_hz = 49;
};

// One loaded program's cumulative run time (kernel BPF stats; counted only
// while some process holds bpf_enable_stats(BPF_STATS_RUN_TIME)).
struct ProgRunStats {
  std::string name;
  uint64_t run_time_ns = 0;
  uint64_t run_cnt = 0;
  uint64_t recursion_misses = 0;  // runs skipped: the program was already running on that CPU
};

class BpfTracer {
 public:
  static Result<std::unique_ptr<BpfTracer>> create(const TracerSettings& s, const KernelFeatures& f);
  ~BpfTracer();
  BpfTracer(const BpfTracer&) = delete;
  BpfTracer& operator=(const BpfTracer&) = delete;

  // *err_no (when given) gets the errno of a failure: E2BIG when the set is full.
  Status add_target(uint32_t tgid, int* err_no = nullptr);
  // A CPython process whose frames the sampler walks (null: forget it).
  // Thread-safe (one map update): the symbol worker calls it.
  void set_python(uint32_t tgid, const st_py_proc* layout);
  Status add_accel_dev(uint32_t kernel_dev, uint64_t ino, uint32_t index);
  // Uprobe on `func` in the ELF at `binary` (all processes; the BPF side filters targets).
  Status attach_uprobe(const std::string& binary, const std::string& func, uint32_t probe_id, bool ret);

  // Run-time switches of the sched/net/block programs (no reload): per-event
  // records on/off, and counting into the per-process aggregation map.
  // The consumer sleeps past its drain interval: the next record wakes it (bpf/common.bpf.h).
  void set_consumer_idle(bool idle);
  // After a drain: the next record past TracerSettings::ring_wake_fill may
  // wake the consumer again. Returns whether one did since the last call.
  bool rearm_fill_wakeup();
  // After a drain: a target's next exec wakes the consumer at once (once;
  // call again after each drain), so a new program image's maps are read
  // before its first device call (bpf/common.bpf.h st_exec_wake).
  void arm_exec_wakeup();
  void set_detail(bool on);
  void set_aggregate(bool on);
  // Every process in the aggregation map, summed over CPUs.
  Result<std::map<uint32_t, st_proc_agg>> read_proc_agg() const;
  // Drops a process from the aggregation map (it exited).
  void forget_proc_agg(uint32_t tgid);

  int ring_map_fd() const;
  // Ring drops, emitted counts and losses (st_loss_map, the LRU evictions
  // derived from its ledger, kretprobe misses from the links).
  Result<DropStats> read_stats() const;
  // Run time of every loaded program (zero unless BPF run-time stats are on).
  std::vector<ProgRunStats> prog_stats() const;
  const std::vector<AttachTier>& tiers() const { return tiers_; }
  const TracerSettings& settings() const { return settings_; }

 private:
  BpfTracer() = default;
  Status open_and_configure(const KernelFeatures& f);
  Status size_maps();  // after the tier plan: where socket owners live decides the LRU's size
  Status load();
  Status attach();
  Status attach_optional();  // kprobe and neuron:* tiers, attached one by one (fallbacks)
  Status attach_syscalls();  // the syscall tier, on the calls the plan needs
  std::string attach_sampler();  // per-CPU perf events for st_cpu_sample; returns the tier

  struct SkelDeleter {
    void operator()(steptrace_bpf* s) const;
  };
  std::unique_ptr<steptrace_bpf, SkelDeleter> skel_;
  std::vector<::bpf_link*> extra_links_;
  std::vector<::bpf_link*> kret_links_;  // kretprobe links (also in extra_links_): their misses
  bool link_missed_ = false;             // this kernel's link info reports kprobe misses
  uint64_t agg_forgotten_ = 0;           // keys forget_proc_agg deleted (not evictions)
  // Derived evictions only grow: a read that overlaps map churn can come out low.
  mutable uint64_t sock_evicted_ = 0, agg_evicted_ = 0;
  std::vector<AttachTier> tiers_;
  TierPlan plan_;
  TracerSettings settings_;
};

// Kernel dev_t encoding (major << 20 | minor) of a userspace st_dev.
uint32_t kernel_dev_from_user(uint64_t st_dev);

}  // namespace steptrace
