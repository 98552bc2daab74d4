// SPDX-License-Identifier: Apache-2.0
// What the host took from each step (bpf/steal.bpf.c, ST_SWITCH_THROTTLED):
// the main thread held off the CPU by its cgroup's CPU quota, the loaders
// throttled or in memory reclaim while the main thread waited for a batch,
// the main thread's own reclaim, and interrupt handlers in its time. Per
// rank, per counted step; the causes big enough to name become findings the
// verdict carries with the knob that fixes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/categories.h"

namespace steptrace {

struct JobAnalysis;

// Means per counted step kept in detail.
struct RankSteals {
  int rank = 0;
  uint64_t steps = 0;
  double step_ns = 0;
  double throttled_ns = 0;       // of cpu_contention
  double throttled_wait_ns = 0;  // all the main thread's quota waits in the step
  double data_throttled_ns = 0;  // of data_loading
  double data_reclaim_ns = 0;    // of data_loading
  double loader_reclaim_ns = 0;  // all the loaders' reclaim in the step
  double data_loading_ns = 0;    // the main thread's wait for batches
  double reclaim_ns = 0;         // main thread's own reclaim
  double irq_ns = 0, softirq_ns = 0;
  uint32_t softirq_vecs = 0;
  double on_cpu_ns = 0, remote_node_ns = 0;  // main thread on a CPU; of it, off its device's node
  int device = -1, device_node = -1;         // numa_placement.h
  std::string device_bdf;
  bool any() const {
    return throttled_ns > 0 || data_throttled_ns > 0 || data_reclaim_ns > 0 || reclaim_ns > 0 || irq_ns > 0 ||
           softirq_ns > 0;
  }
};

enum class StealCause : uint8_t {
  cpu_throttling,
  loader_throttling,
  loader_reclaim,
  main_reclaim,
  interrupts,
  numa_remote,  // placement: the main thread ran off its device's NUMA node
};
std::string_view steal_cause_name(StealCause c);

struct StealFinding {
  StealCause cause = StealCause::cpu_throttling;
  Category within = Category::other;  // the category whose time it is
  std::vector<int> ranks;             // the ranks where it is big enough to name
  double ns_per_step = 0;             // mean over those ranks
  double share = 0;                   // of their mean step
  std::string text;                   // "the cgroup's CPU quota held the main thread off the CPU 38.0 ms/step (31%)"
  std::string recommendation;         // names the knob
};

struct HostSteals {
  std::vector<RankSteals> ranks;
  std::vector<StealFinding> findings;  // largest first
};

// A cause is named on a rank when it takes this share of its step or more.
inline constexpr double kStealNameShare = 0.03;

HostSteals summarize_host_steals(const JobAnalysis& job);

// The findings into the verdict: evidence for each; the headline and the
// recommendation where one is a large part of the verdict's own category
// (throttling behind most of the CPU wait, reclaim behind the batches' wait)
// or of the step.
void annotate_verdict_with_host_steals(JobAnalysis& job);

// "NET_RX,TIMER" for a softirq vector mask.
std::string softirq_vec_names(uint32_t vecs);

}  // namespace steptrace
