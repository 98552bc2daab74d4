// SPDX-License-Identifier: Apache-2.0
// Attribution and the verdict: on the ranks and steps the steps stage found
// (steps/rank_steps.h), split every step's wall time into categories, apply
// the device signals, compare ranks, and say what gates the accelerator.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attribution/categories.h"
#include "attribution/change_points.h"
#include "attribution/fabric_setup.h"
#include "attribution/host_steals.h"
#include "attribution/sample_classes.h"
#include "attribution/numa_placement.h"
#include "attribution/step_histogram.h"
#include "attribution/what_if_types.h"
#include "capture/drop_stats.h"
#include "signals/step_signals.h"
#include "steps/rank_steps.h"
#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"

namespace steptrace {

struct StepResult {
  int index = 0;
  uint64_t start_ns = 0, end_ns = 0;
  CategoryNs ns{};
  uint64_t data_storage_ns = 0;     // data_loading while loaders waited on storage
  uint64_t data_preprocess_ns = 0;  // data_loading while loaders computed
  // CPU-only rank: collective time during which the main thread ran (the
  // backward pass overlapping the all-reduce, or a reduction on the CPU).
  uint64_t collective_on_cpu_ns = 0;
  uint64_t arrival_ns = 0;          // arrival at the collective (cross-rank skew)
  bool host_collective = false;     // arrival_ns is the start of a send/recv collective
  uint64_t late_ns = 0;             // arrival - earliest arrival of any rank
  uint64_t copy_bytes = 0;
  uint32_t copies = 0;
  uint32_t fabric_calls = 0;        // uverbs calls (EFA control path) that started in this step
  uint64_t fabric_ns = 0;           // their time inside the step
  uint64_t fabric_reg_bytes = 0;    // memory they registered
  bool straggler = false;           // this rank arrived last (and late) at a coupled collective
  bool coupled = false;             // a collective holds this step's ranks together (cross_rank)
  // Loader threads' busy time (on a CPU, waiting for one, or on storage)
  // inside the step, summed over the rank's loaders: slow loaders that keep
  // ahead of the main thread (prefetch) cost it no data_loading wait.
  uint64_t loader_busy_ns = 0;
  // cpu_contention by what the main thread waited for a CPU inside of: a
  // copy's ioctl (dma_submission), a collective, its wake-up from a wait for
  // a batch (data_loading); `other` where it was none of these. Removing a
  // category in the what-if removes these waits with it.
  CategoryNs contention_under{};
  // Of dma_submission, what submits executions (descriptor writes, queue
  // kicks): every execution needs it, so the what-if keeps it when the
  // copies go.
  uint64_t exec_submit_ns = 0;
  // What the host took from the step (host-steals, bpf/steal.bpf.c):
  // of cpu_contention, the main thread's waits because its cgroup ran out of
  // CPU quota; of data_loading, the share the loaders spent throttled and in
  // memory reclaim (a split of it beside storage and preprocessing); the
  // main thread's own reclaim time and the interrupt handler time that ran
  // in its slices (inside whatever category the time went to).
  uint64_t throttled_ns = 0;
  // All of the main thread's waits for its cgroup's quota inside the step,
  // whatever the time went to (throttled_ns is the part on the step's
  // critical path: a poller throttled while the device works loses nothing).
  uint64_t throttled_wait_ns = 0;
  uint64_t data_throttled_ns = 0;
  uint64_t data_reclaim_ns = 0;
  // All of the loaders' reclaim inside the step, summed over them, whether
  // the main thread waited meanwhile or not (data_reclaim_ns is its wait).
  uint64_t loader_reclaim_ns = 0;
  uint64_t reclaim_ns = 0;
  uint64_t irq_ns = 0;
  uint64_t softirq_ns = 0;
  uint32_t softirq_vecs = 0;        // softirq vectors seen (1 << NET_RX_SOFTIRQ ...)
  // The main thread's on-CPU time in the step, and the part of it on another
  // NUMA node than its device's (0 when the device's node is unknown).
  uint64_t on_cpu_ns = 0;
  uint64_t remote_node_ns = 0;
  Category gating = Category::other;
  signals::StepDeviceSignals dev;   // device counters (NDS, EFA, proxy threads) for this step
  uint64_t duration() const { return end_ns - start_ns; }
};

struct RankResult {
  int rank = 0;           // order of the rank processes by pid
  uint32_t pid = 0, main_tid = 0;
  std::string comm;
  StepSource source = StepSource::none;
  std::vector<uint32_t> loader_pids;  // child processes (DataLoader workers)
  std::vector<uint32_t> loader_tids;  // every thread that can hand batches to main
  // The steps kept in detail: all of them in a short session, the most recent
  // ones once a long session folds older steps into the totals
  // (pipeline/step_ledger.h). Counts and totals below cover every step.
  std::vector<StepResult> steps;
  uint64_t steps_total = 0;           // steps found, kept in detail or not
  uint64_t counted_steps = 0;         // of them, past the warm-up
  CategoryNs total{};                 // over counted steps
  uint64_t counted_ns = 0;
  uint64_t straggler_steps = 0;       // steps where this rank arrived last (and late)
  // A CPU-only rank (steps from its collective traffic): the burst model its
  // steps were cut with. Unknown while its steps do not agree well enough:
  // a long session then keeps them open (pipeline/step_ledger.h).
  bool host_only = false;
  steps::BurstModel burst;
  DevicePlacement numa;  // its device and the device's NUMA node
};

struct Verdict {
  Category category = Category::other;
  std::string headline;      // one line, plain words
  double confidence = 0;     // 0..1
  std::vector<std::string> evidence;
  std::string recommendation;
  bool incomplete = false;   // events were dropped in the window
  int straggler_rank = -1;
  uint64_t straggler_late_ns = 0;      // mean lateness when it was last
  Category straggler_cause = Category::other;
  double straggler_excess = 0;         // its share of the cause over the other ranks' (0: its largest cost)
};

struct JobAnalysis {
  std::vector<RankResult> ranks;
  std::array<double, kCategories> mean_share{};  // over counted steps of all ranks
  Verdict verdict;
  int skipped_warmup_steps = 1;
  signals::DeviceSignalsSummary signals;  // which device signals were available and what they say
  FabricSummary fabric;                   // EFA control path (uverbs calls) as setup events
  WhatIfReport what_if;                   // predicted step time per fix (attribution/what_if.h)
  // Counted steps of every rank that are no longer in ranks[].steps (a long
  // session keeps the most recent in detail): percentiles cover them from here.
  StepDistribution out_of_detail;
  // Where the step time changed level (attribution/change_points.h), over the steps kept in detail.
  std::vector<ChangePoint> changes;
  // What the host took from the steps (attribution/host_steals.h).
  HostSteals host_steals;
  // On-CPU stack samples joined with the steps (attribution/sample_classes.h).
  CpuProfile profile;
};

namespace signals {
struct SignalsData;
}

// A windowed analysis picks each rank up where its folded steps ended
// (pipeline/step_ledger.h): steps that lie mostly before cut_ns were folded
// already and are left out; the next one starts at cut_ns, numbered next_index.
struct ResumePoint {
  uint64_t cut_ns = 0;
  int next_index = 0;
  steps::BurstModel burst;  // a CPU-only rank: how its traffic splits into steps
};

struct AnalysisOptions {
  int skip_warmup_steps = 1;  // first steps of each rank left out of shares and the verdict
  const signals::SignalsData* device_signals = nullptr;  // sampled device counters (user/signals)
  std::map<uint32_t, ResumePoint> resume;  // by rank pid
  uint64_t others_from_ns = 0;  // work of processes that are not ranks was counted up to here
  // Network proxy threads named by earlier windows (pipeline/step_ledger.h): measured in this one too.
  const std::vector<signals::ProxyThread>* known_proxies = nullptr;
  const SampleStore* samples = nullptr;  // on-CPU stack samples, sorted by time (profile/cpu_samples.h)
  // The steps stage alone: each rank and its step windows, nothing attributed
  // and no verdict (the hang watch's probe needs only where steps end).
  bool steps_only = false;
};

JobAnalysis analyze_job(const TimelineStore& tl, const ThreadTable& threads, const DropStats& drops,
                        const AnalysisOptions& opt = {});
// The last stage of analyze_job, on its own for a merged analysis: the
// verdict from the ranks' totals and steps, evidence from the timeline.
void judge(JobAnalysis& job, const TimelineStore& tl, const DropStats& drops);

}  // namespace steptrace
