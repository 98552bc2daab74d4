// SPDX-License-Identifier: Apache-2.0
#include "attribution/host_steals.h"

#include <fmt/core.h>

#include <algorithm>

#include "attribution/job_analysis.h"

namespace steptrace {

std::string_view steal_cause_name(StealCause c) {
  switch (c) {
    case StealCause::cpu_throttling: return "cpu_throttling";
    case StealCause::loader_throttling: return "loader_throttling";
    case StealCause::loader_reclaim: return "loader_reclaim";
    case StealCause::main_reclaim: return "main_reclaim";
    case StealCause::interrupts: return "interrupts";
    case StealCause::numa_remote: return "numa_remote";
  }
  return "unknown";
}

std::string softirq_vec_names(uint32_t vecs) {
  static constexpr const char* kNames[] = {"HI",      "TIMER", "NET_TX", "NET_RX",  "BLOCK",
                                           "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"};
  std::string s;
  for (uint32_t i = 0; i < 32; ++i)
    if (vecs & (1u << i)) s += (s.empty() ? "" : ",") + (i < 10 ? std::string(kNames[i]) : fmt::format("vec{}", i));
  return s;
}

namespace {

double ms(double ns) { return ns / 1e6; }

RankSteals rank_steals(const JobAnalysis& job, const RankResult& r) {
  RankSteals s;
  s.rank = r.rank;
  for (const auto& st : r.steps) {
    if (st.index < job.skipped_warmup_steps) continue;
    ++s.steps;
    s.step_ns += static_cast<double>(st.duration());
    s.throttled_ns += static_cast<double>(st.throttled_ns);
    s.throttled_wait_ns += static_cast<double>(st.throttled_wait_ns);
    s.data_throttled_ns += static_cast<double>(st.data_throttled_ns);
    s.data_reclaim_ns += static_cast<double>(st.data_reclaim_ns);
    s.loader_reclaim_ns += static_cast<double>(st.loader_reclaim_ns);
    s.data_loading_ns += static_cast<double>(st.ns[static_cast<size_t>(Category::data_loading)]);
    s.reclaim_ns += static_cast<double>(st.reclaim_ns);
    s.irq_ns += static_cast<double>(st.irq_ns);
    s.softirq_ns += static_cast<double>(st.softirq_ns);
    s.softirq_vecs |= st.softirq_vecs;
    s.on_cpu_ns += static_cast<double>(st.on_cpu_ns);
    s.remote_node_ns += static_cast<double>(st.remote_node_ns);
  }
  if (s.steps) {
    const double n = static_cast<double>(s.steps);
    for (double* v : {&s.step_ns, &s.throttled_ns, &s.throttled_wait_ns, &s.data_throttled_ns, &s.data_reclaim_ns,
                      &s.loader_reclaim_ns, &s.data_loading_ns, &s.reclaim_ns, &s.irq_ns, &s.softirq_ns, &s.on_cpu_ns,
                      &s.remote_node_ns})
      *v /= n;
  }
  s.device = r.numa.device;
  s.device_node = r.numa.device_node;
  s.device_bdf = r.numa.device_bdf;
  return s;
}

// The main threads that ran mostly on another NUMA node than their device's:
// their copies to and from the device and the runtime's host buffers cross
// the interconnect. Named when half of a rank's on-CPU time in its steps or
// more was remote, and that time is a visible part of the step.
void add_numa_finding(HostSteals& out) {
  StealFinding f;
  f.cause = StealCause::numa_remote;
  f.within = Category::host_overhead;
  double ns = 0, step = 0;
  std::string where;
  for (const auto& s : out.ranks) {
    if (s.device_node < 0 || s.on_cpu_ns <= 0 || s.remote_node_ns < 0.5 * s.on_cpu_ns ||
        s.remote_node_ns < kStealNameShare * s.step_ns)
      continue;
    f.ranks.push_back(s.rank);
    ns += s.remote_node_ns;
    step += s.step_ns;
    where += fmt::format("{}rank {} ({:.0f}% of its CPU time off node {}, the node of neuron{}{})",
                         where.empty() ? "" : "; ", s.rank, 100 * s.remote_node_ns / s.on_cpu_ns, s.device_node,
                         s.device, s.device_bdf.empty() ? "" : " at " + s.device_bdf);
  }
  if (f.ranks.empty()) return;
  f.ns_per_step = ns / static_cast<double>(f.ranks.size());
  f.share = step > 0 ? ns / step : 0;
  f.text = fmt::format("the main thread ran {:.1f} ms/step on another NUMA node than its device: {}",
                       ms(f.ns_per_step), where);
  f.recommendation = "bind each rank to its device's node: numactl --cpunodebind=N --membind=N, or taskset -c with the "
                     "device's /sys/bus/pci/devices/BDF/local_cpulist (the launcher's CPU binding, e.g. Slurm "
                     "--cpu-bind)";
  out.findings.push_back(std::move(f));
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += fmt::format("{}{}", s.empty() ? "" : ", ", r);
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

}  // namespace

HostSteals summarize_host_steals(const JobAnalysis& job) {
  HostSteals out;
  for (const auto& r : job.ranks) out.ranks.push_back(rank_steals(job, r));

  struct Cause {
    StealCause cause;
    Category within;
    double RankSteals::*field;
  };
  static constexpr Cause kCauses[] = {
      {StealCause::cpu_throttling, Category::cpu_contention, &RankSteals::throttled_ns},
      {StealCause::loader_throttling, Category::data_loading, &RankSteals::data_throttled_ns},
      {StealCause::loader_reclaim, Category::data_loading, &RankSteals::loader_reclaim_ns},
      {StealCause::main_reclaim, Category::other, &RankSteals::reclaim_ns},
      {StealCause::interrupts, Category::host_overhead, nullptr},
  };
  for (const auto& c : kCauses) {
    StealFinding f;
    f.cause = c.cause;
    f.within = c.within;
    double ns = 0, step = 0;
    uint32_t vecs = 0;
    for (const auto& s : out.ranks) {
      const double v = c.field ? s.*(c.field) : s.irq_ns + s.softirq_ns;
      // Named on a rank when it is a visible part of its step, and not
      // a few timer ticks on a short one.
      if (s.steps == 0 || s.step_ns <= 0 || v < kStealNameShare * s.step_ns || v < 200'000.0) continue;
      // The loaders' reclaim costs the step only where the main thread waits
      // for their batches (a loader that keeps ahead hides it).
      if (c.cause == StealCause::loader_reclaim && s.data_loading_ns < kStealNameShare * s.step_ns) continue;
      f.ranks.push_back(s.rank);
      ns += v;
      step += s.step_ns;
      if (!c.field) vecs |= s.softirq_vecs;
    }
    if (f.ranks.empty()) continue;
    f.ns_per_step = ns / static_cast<double>(f.ranks.size());
    f.share = step > 0 ? ns / step : 0;
    const std::string where = rank_list(f.ranks);
    switch (c.cause) {
      case StealCause::cpu_throttling: {
        double wait = 0;
        for (const auto& s : out.ranks)
          if (std::find(f.ranks.begin(), f.ranks.end(), s.rank) != f.ranks.end()) wait += s.throttled_wait_ns;
        wait /= static_cast<double>(f.ranks.size());
        f.text = fmt::format("the cgroup's CPU quota held the main thread off the CPU {:.1f} ms/step ({:.0f}% of the "
                             "step) on {}",
                             ms(f.ns_per_step), 100 * f.share, where);
        // The rest of the quota waits fell while the device worked anyway.
        if (wait > f.ns_per_step * 1.2)
          f.text += fmt::format(" (throttled {:.1f} ms/step in all; the rest while the device worked anyway)", ms(wait));
        f.recommendation = "raise or remove the CPU limit of the training container's cgroup: cpu.max (cgroup v2) or "
                           "cpu.cfs_quota_us (v1), resources.limits.cpu in Kubernetes";
        break;
      }
      case StealCause::loader_throttling:
        f.text = fmt::format("the loaders sat out their cgroup's CPU quota {:.1f} ms/step ({:.0f}%) of the main "
                             "thread's wait for batches on {}",
                             ms(f.ns_per_step), 100 * f.share, where);
        f.recommendation = "raise the loaders' CPU limit (cpu.max / resources.limits.cpu) or run fewer, busier workers";
        break;
      case StealCause::loader_reclaim: {
        double waited = 0;
        for (const auto& s : out.ranks)
          if (std::find(f.ranks.begin(), f.ranks.end(), s.rank) != f.ranks.end()) waited += s.data_reclaim_ns;
        waited /= static_cast<double>(f.ranks.size());
        f.text = fmt::format("the loaders were in memory reclaim {:.1f} ms/step ({:.0f}% of the step) on {}, {:.1f} "
                             "ms/step of it while the main thread waited for batches",
                             ms(f.ns_per_step), 100 * f.share, where, ms(waited));
        f.recommendation = "the loaders' cgroup is at its memory limit: raise memory.high / memory.max "
                           "(resources.limits.memory), or make the dataset's page cache fit (smaller shards, "
                           "fewer workers, O_DIRECT reads)";
        break;
      }
      case StealCause::main_reclaim:
        f.text = fmt::format("the main thread was in memory reclaim {:.1f} ms/step ({:.0f}% of the step) on {}",
                             ms(f.ns_per_step), 100 * f.share, where);
        f.recommendation = "the training process's cgroup is at its memory limit or the node is short of memory: raise "
                           "memory.high / memory.max (resources.limits.memory), or free page cache on the node";
        break;
      case StealCause::interrupts:
        f.text = fmt::format("interrupt handlers{} ran in the main thread's time {:.1f} ms/step ({:.0f}% of the step) "
                             "on {}",
                             vecs ? fmt::format(" (softirq {})", softirq_vec_names(vecs)) : std::string(),
                             ms(f.ns_per_step), 100 * f.share, where);
        f.recommendation = "steer interrupts and receive processing off the training threads' CPUs: "
                           "/proc/irq/N/smp_affinity or irqbalance --banirq, RPS/RFS (rps_cpus), or pin the main "
                           "threads to other CPUs";
        break;
      case StealCause::numa_remote: break;  // add_numa_finding
    }
    out.findings.push_back(std::move(f));
  }
  add_numa_finding(out);
  std::sort(out.findings.begin(), out.findings.end(),
            [](const StealFinding& a, const StealFinding& b) { return a.ns_per_step > b.ns_per_step; });
  return out;
}

void annotate_verdict_with_host_steals(JobAnalysis& job) {
  auto& v = job.verdict;
  bool headline_named = false;
  for (const auto& f : job.host_steals.findings) {
    v.evidence.push_back("host steal: " + f.text);
    if (f.cause == StealCause::numa_remote) {
      // Placement, not time taken: what it costs is inside the copies and
      // host code, which the verdict names already.
      v.recommendation += "; " + f.recommendation;
      continue;
    }
    if (headline_named) continue;
    // What share of the verdict's own category this cause is (its mean over
    // the ranks where it is named, against the job's mean per step).
    double cat_ns = 0, steps = 0;
    for (const auto& r : job.ranks)
      for (const auto& st : r.steps)
        if (st.index >= job.skipped_warmup_steps) {
          cat_ns += static_cast<double>(st.ns[static_cast<size_t>(v.category)]);
          ++steps;
        }
    const double cat_per_step = steps > 0 ? cat_ns / steps : 0;
    // Named findings are a visible part of the step already (kStealNameShare):
    // one inside the verdict's category says what that category is made of.
    const bool behind_verdict = f.within == v.category && cat_per_step > 0;
    // A cause outside the verdict's category is named when it is a tenth of the step.
    if (!behind_verdict && f.share < 0.10) continue;
    headline_named = true;
    if (f.cause == StealCause::cpu_throttling && behind_verdict) {
      v.headline += "; it is CPU throttling: " + f.text;
      v.recommendation = f.recommendation + "; " + v.recommendation;
    } else {
      v.headline += "; " + f.text;
      v.recommendation = f.recommendation + "; " + v.recommendation;
    }
  }
}

}  // namespace steptrace
