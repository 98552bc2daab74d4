// SPDX-License-Identifier: Apache-2.0
// The Prometheus exposition of the daemon's state, rendered once a second
// on the main thread and served by the HTTP thread.
#include "daemon/daemon_impl.h"

#include <fmt/core.h>

#include <algorithm>

#include "util/sys_root.h"
#include "util/version.h"

namespace steptrace::daemon {

Labels Daemon::host_labels(Labels l) const {
  l.insert(l.begin(), {"host", host_});
  return l;
}

void Daemon::render_metrics() {
  Exposition x;
  x.family("steptrace_build_info", "gauge", "steptrace version");
  x.sample("steptrace_build_info", host_labels({{"version", kVersion}}), 1);
  render_step_metrics(x);
  render_change_metrics(x);
  render_process_metrics(x);
  render_loss_metrics(x);
  render_cost_metrics(x);
  render_housekeeping_metrics(x);
  http_.set_metrics(x.text());
}

// Per rank: step durations, categories, straggler steps, the EFA control
// path; the verdict and the straggler of the last window. The per-rank series
// carry {host, training_job, rank} only: `job` is Prometheus's own target
// label, and a pid would start new series at every restart (the pids are in
// steptrace_rank_info).
void Daemon::render_step_metrics(Exposition& x) const {
  auto R = [this](const RankSeries& s, Labels more = {}) {
    Labels l = host_labels({{"training_job", s.job}, {"rank", s.rank}});
    if (!s.node.empty()) l.insert(l.end() - 1, {"node", s.node});  // training_job, node, rank
    l.insert(l.end(), more.begin(), more.end());
    return l;
  };
  x.family("steptrace_rank_info", "gauge",
           "1 for each process that ran as this rank while its series lives (a restart adds one; gone processes "
           "leave after two windows)");
  for (const auto& [k, s] : series_)
    for (const auto& [pid, p] : s.procs) {
      Labels who = {{"pid", std::to_string(pid)}, {"comm", p.comm}};
      // Outside Kubernetes the pod labels are left out (an empty value is no label to Prometheus).
      for (const auto& [name, value] :
           {std::pair{"namespace", &p.pod_namespace}, {"pod", &p.pod}, {"container", &p.container}})
        if (!value->empty()) who.emplace_back(name, *value);
      x.sample("steptrace_rank_info", R(s, std::move(who)), 1);
    }
  x.family("steptrace_step_duration_seconds", "histogram", "Training step wall time per rank (steps cut by a window edge excluded)");
  for (const auto& [k, s] : series_) {
    Labels base = R(s);
    for (size_t b = 0; b < kNumBuckets; ++b)
      x.sample("steptrace_step_duration_seconds_bucket", R(s, {{"le", format_value(kBuckets[b])}}),
               static_cast<double>(s.buckets[b]));
    x.sample("steptrace_step_duration_seconds_bucket", R(s, {{"le", "+Inf"}}), static_cast<double>(s.count));
    x.sample("steptrace_step_duration_seconds_sum", base, s.sum_s);
    x.sample("steptrace_step_duration_seconds_count", base, static_cast<double>(s.count));
  }
  x.family("steptrace_category_seconds_total", "counter", "Step wall time attributed to each category, per rank");
  for (const auto& [k, s] : series_)
    for (size_t c = 0; c < kCategories; ++c)
      x.sample("steptrace_category_seconds_total", R(s, {{"category", std::string(kCategoryNames[c])}}), s.cat_s[c]);
  {
    // RankSeries::steal_s, in this order.
    constexpr const char* kStealLabels[] = {"cpu_throttling", "loader_throttling", "loader_reclaim",
                                            "main_reclaim",   "irq",               "softirq"};
    x.family("steptrace_host_steal_seconds_total", "counter",
             "Step time the host took, per rank: the main thread throttled by its cgroup's CPU quota (of "
             "cpu_contention), loaders throttled or in memory reclaim (of data_loading), the main thread's reclaim, "
             "interrupt handlers in its time");
    for (const auto& [k, s] : series_)
      for (size_t i = 0; i < s.steal_s.size(); ++i)
        x.sample("steptrace_host_steal_seconds_total", R(s, {{"cause", kStealLabels[i]}}), s.steal_s[i]);
  }
  x.family("steptrace_straggler_steps_total", "counter", "Steps in which this rank arrived last at the collective");
  for (const auto& [k, s] : series_)
    x.sample("steptrace_straggler_steps_total", R(s), static_cast<double>(s.straggler_steps));

  x.family("steptrace_arrival_lateness_seconds_total", "counter",
           "How late this rank arrived at the collective after the earliest rank on this host, over the steps a "
           "collective coupled (this host's ranks only: lateness against other nodes shows in the merged report)");
  for (const auto& [k, s] : series_) x.sample("steptrace_arrival_lateness_seconds_total", R(s), s.late_s);

  // One family, then the next: the text format wants each family's samples together.
  constexpr const char* kWhere[2] = {"in_steps", "outside_steps"};
  x.family("steptrace_efa_control_calls_total", "counter",
           "uverbs calls (EFA control path: queue pairs, memory registrations) inside steps or outside them");
  for (const auto& [k, s] : series_)
    for (int w = 0; w < 2; ++w)
      x.sample("steptrace_efa_control_calls_total", R(s, {{"where", kWhere[w]}}), static_cast<double>(s.efa_calls[w]));
  x.family("steptrace_efa_control_seconds_total", "counter", "Time in those uverbs calls");
  for (const auto& [k, s] : series_)
    for (int w = 0; w < 2; ++w) x.sample("steptrace_efa_control_seconds_total", R(s, {{"where", kWhere[w]}}), s.efa_s[w]);

  x.family("steptrace_verdict", "gauge", "1 for what gates the accelerator in the last window (verdict=none: no steps)");
  std::string current = have_verdict_ ? std::string(category_name(verdict_.category)) : "none";
  for (size_t c = 0; c < kCategories; ++c)
    x.sample("steptrace_verdict", host_labels({{"verdict", std::string(kCategoryNames[c])}}), current == kCategoryNames[c] ? 1 : 0);
  x.sample("steptrace_verdict", host_labels({{"verdict", "none"}}), current == "none" ? 1 : 0);
  x.family("steptrace_verdict_confidence", "gauge", "Confidence of the current verdict (0..1)");
  x.sample("steptrace_verdict_confidence", host_labels({}), have_verdict_ ? verdict_.confidence : 0);
  x.family("steptrace_straggler_rank", "gauge",
           "Rank of the straggler in the last detailed window (the rank label's number), -1 when none");
  x.sample("steptrace_straggler_rank", host_labels({}), straggler_rank_);
}

// In-kernel per-process counters (levels aggregated and up; frozen below them),
// summed by {host, training_job, rank, comm}: a rank's DataLoader workers
// count apart from it when their comm differs, and a restart keeps the series.
void Daemon::render_process_metrics(Exposition& x) const {
  std::map<AggKey, st_proc_agg> sums = agg_retired_;
  for (const auto& [tgid, s] : agg_) {
    auto& v = sums[agg_key(s)];
    v = v + s.cur;
  }
  auto P = [this](const AggKey& k, Labels more = {}) {
    Labels l = host_labels({{"training_job", std::get<0>(k)}, {"rank", std::get<1>(k)}, {"comm", std::get<2>(k)}});
    l.insert(l.end(), more.begin(), more.end());
    return l;
  };
  x.family("steptrace_process_cpu_seconds_total", "counter",
           "On-CPU time of the traced processes (sum_exec_runtime, counted in the kernel at levels aggregated and up)");
  for (const auto& [k, v] : sums) x.sample("steptrace_process_cpu_seconds_total", P(k), static_cast<double>(v.oncpu_ns) / 1e9);
  x.family("steptrace_process_runqueue_wait_seconds_total", "counter",
           "Time the traced processes' threads waited on a run queue (schedstat run_delay)");
  for (const auto& [k, v] : sums)
    x.sample("steptrace_process_runqueue_wait_seconds_total", P(k), static_cast<double>(v.runq_wait_ns) / 1e9);
  x.family("steptrace_process_context_switches_total", "counter",
           "Context switches of the traced processes' threads (type=involuntary: left the CPU still runnable)");
  for (const auto& [k, v] : sums) {
    x.sample("steptrace_process_context_switches_total", P(k, {{"type", "voluntary"}}),
             static_cast<double>(v.switches - std::min(v.switches, v.involuntary)));
    x.sample("steptrace_process_context_switches_total", P(k, {{"type", "involuntary"}}),
             static_cast<double>(v.involuntary));
  }
  x.family("steptrace_process_network_bytes_total", "counter", "TCP payload bytes the traced processes sent and received");
  for (const auto& [k, v] : sums) {
    x.sample("steptrace_process_network_bytes_total", P(k, {{"direction", "send"}}), static_cast<double>(v.net_send_bytes));
    x.sample("steptrace_process_network_bytes_total", P(k, {{"direction", "receive"}}), static_cast<double>(v.net_recv_bytes));
  }
  x.family("steptrace_process_block_bytes_total", "counter", "Bytes of completed block requests the traced processes issued");
  for (const auto& [k, v] : sums) {
    x.sample("steptrace_process_block_bytes_total", P(k, {{"op", "read"}}), static_cast<double>(v.block_read_bytes));
    x.sample("steptrace_process_block_bytes_total", P(k, {{"op", "write"}}), static_cast<double>(v.block_write_bytes));
  }
  x.family("steptrace_process_block_requests_total", "counter", "Completed block requests the traced processes issued");
  for (const auto& [k, v] : sums) x.sample("steptrace_process_block_requests_total", P(k), static_cast<double>(v.block_rqs));
}

// What was lost: ring drops, BPF-side losses, refused targets, late records.
void Daemon::render_loss_metrics(Exposition& x) {
  DropStats d = cumulative_drops();
  x.family("steptrace_events_total", "counter", "Events emitted by the BPF collectors, per class");
  for (int k = 1; k < ST_EV_KIND_MAX; ++k)
    x.sample("steptrace_events_total", host_labels({{"class", std::string(kind_name(static_cast<uint32_t>(k)))}}),
             static_cast<double>(d.emitted[k]));
  x.family("steptrace_events_dropped_total", "counter", "Events lost to a full ring buffer, per class");
  for (int k = 1; k < ST_EV_KIND_MAX; ++k)
    x.sample("steptrace_events_dropped_total", host_labels({{"class", std::string(kind_name(static_cast<uint32_t>(k)))}}),
             static_cast<double>(d.dropped[k]));
  x.family("steptrace_bpf_losses_total", "counter",
           "State the BPF collectors could not keep (full or evicting maps, missed kretprobes, processes the target "
           "set refused), per kind; see steptrace_bpf_loss_measurable");
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    x.sample("steptrace_bpf_losses_total", host_labels({{"kind", std::string(loss_name(k))}}), static_cast<double>(d.losses[k]));
  x.family("steptrace_bpf_loss_measurable", "gauge",
           "0 when this kernel cannot measure a loss kind (kretprobe misses before 6.7): its counter stays 0");
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    x.sample("steptrace_bpf_loss_measurable", host_labels({{"kind", std::string(loss_name(k))}}),
             k == ST_LOSS_KRETPROBE_MISSED && d.kretprobe == LossMeasure::not_measurable ? 0 : 1);
  x.family("steptrace_target_add_failures_total", "counter",
           "Processes to trace that the kernel's target set refused, by cause (map_full: ST_MAX_TARGETS reached)");
  for (const char* c : {"map_full", "error"})
    x.sample("steptrace_target_add_failures_total", host_labels({{"cause", c}}), static_cast<double>(target_add_failures_[c]));
  x.family("steptrace_untraced_processes", "gauge", "Processes to trace that are not in the target set now");
  x.sample("steptrace_untraced_processes", host_labels({}), static_cast<double>(untraced_.size()));
  x.family("steptrace_window_incomplete", "gauge",
           "1 when the last closed analysis window lost events or attribution (drops or losses): its verdict and "
           "categories may be off");
  x.sample("steptrace_window_incomplete", host_labels({}), window_incomplete_ ? 1 : 0);
  x.family("steptrace_records_total", "counter", "Records read from the ring buffer");
  x.sample("steptrace_records_total", host_labels({}), static_cast<double>(pipe_.records()));
  x.family("steptrace_late_records_total", "counter", "Records that arrived too late to be ordered");
  x.sample("steptrace_late_records_total", host_labels({}), static_cast<double>(pipe_.late()));

}

// What tracing costs (CPU, memory) and the degradation ladder it answers with.
void Daemon::render_cost_metrics(Exposition& x) const {
  x.family("steptrace_tracer_cpu_seconds_total", "counter",
           "CPU used by the tracer: userspace (mode=user|system, getrusage) and BPF programs (mode=bpf, BPF stats: "
           "measured while they are on, their rate carried between; bpf_stats_every_s)");
  x.sample("steptrace_tracer_cpu_seconds_total", host_labels({{"mode", "user"}}), cpu_.user);
  x.sample("steptrace_tracer_cpu_seconds_total", host_labels({{"mode", "system"}}), cpu_.sys);
  x.sample("steptrace_tracer_cpu_seconds_total", host_labels({{"mode", "bpf"}}), bpf_now_s_);
  x.family("steptrace_bpf_prog_run_seconds_total", "counter",
           "Run time of each BPF program while BPF statistics were on (one second in bpf_stats_every_s where the "
           "daemon holds them)");
  std::map<std::string, double> progs = prog_base_s_;
  if (tracer_)
    for (const auto& p : tracer_->prog_stats()) progs[p.name] += static_cast<double>(p.run_time_ns) / 1e9;
  for (const auto& [name, s] : progs) x.sample("steptrace_bpf_prog_run_seconds_total", host_labels({{"prog", name}}), s);
  x.family("steptrace_bpf_stats_enabled", "gauge", "1 when BPF run-time statistics are on");
  x.sample("steptrace_bpf_stats_enabled", host_labels({}), bpf_stats_enabled() ? 1 : 0);
  x.family("steptrace_resident_memory_bytes", "gauge", "Resident set size of the daemon");
  x.sample("steptrace_resident_memory_bytes", host_labels({}), static_cast<double>(rss_bytes()));

  x.family("steptrace_cpu_budget_ratio", "gauge", "CPU budget, in cores (1 = one core; --max-cpu / 100)");
  x.sample("steptrace_cpu_budget_ratio", host_labels({}), budget_.budget_percent() / 100);
  x.family("steptrace_cpu_usage_ratio", "gauge",
           "Tracer CPU (userspace + BPF) over the last seconds, in cores (1 = one core)");
  x.sample("steptrace_cpu_usage_ratio", host_labels({}), budget_.average_percent() / 100);
  // The level is the value, not a label: a label that changed with it would
  // end one series and start another at every step of the ladder.
  x.family("steptrace_degradation_level", "gauge",
           "Position on the degradation ladder: 0 full, 1 slow_drain, 2 sampled, 3 aggregated, 4 no_net, "
           "5 no_block, 6 no_sched, 7 paused; higher levels shed work to stay within the CPU budget");
  x.sample("steptrace_degradation_level", host_labels({}), budget_.level());
  x.family("steptrace_degradations_total", "counter", "Times the CPU budget forced a degradation step");
  x.sample("steptrace_degradations_total", host_labels({}), static_cast<double>(degradations_));
  x.family("steptrace_degradation_floor", "gauge",
           "The configured lowest-cost start level (degrade_level), numbered as steptrace_degradation_level");
  x.sample("steptrace_degradation_floor", host_labels({}), budget_.floor());
  x.family("steptrace_detail_windows_total", "counter",
           "Analysis windows closed with per-event sched/net/block detail (detail=on) or without it (detail=off: "
           "sampled out at level sampled, or aggregated and up); categories and the verdict come from detail=on only");
  x.sample("steptrace_detail_windows_total", host_labels({{"detail", "on"}}), static_cast<double>(detail_windows_[1]));
  x.sample("steptrace_detail_windows_total", host_labels({{"detail", "off"}}), static_cast<double>(detail_windows_[0]));
  x.family("steptrace_detail_enabled", "gauge", "1 when the current window records per-event detail");
  x.sample("steptrace_detail_enabled", host_labels({}), window_detail_ && tracer_ ? 1 : 0);
  x.family("steptrace_aggregation_enabled", "gauge", "1 when the BPF programs count per process in the kernel");
  x.sample("steptrace_aggregation_enabled", host_labels({}), budget_.level() >= kLevelAggregated && tracer_ ? 1 : 0);
  x.family("steptrace_collector_enabled", "gauge", "1 when the collector runs");
  const std::pair<const char*, uint32_t> subs[] = {
      {"sched", ST_SUB_SCHED}, {"block", ST_SUB_BLOCK}, {"net", ST_SUB_NET}, {"accel", ST_SUB_ACCEL}, {"uprobe", ST_SUB_UPROBE}, {"steal", ST_SUB_STEAL}};
  for (const auto& [name, bit] : subs)
    x.sample("steptrace_collector_enabled", host_labels({{"collector", name}}), (active_subsystems_ & bit) ? 1 : 0);

}

// Discovery, caps, windows, the flight recorder, dumps and reloads.
void Daemon::render_housekeeping_metrics(Exposition& x) {
  x.family("steptrace_tracked_processes", "gauge", "Accelerator processes traced now");
  x.sample("steptrace_tracked_processes", host_labels({}), static_cast<double>(tracked_.size()));
  x.family("steptrace_discovered_processes_total", "counter", "Accelerator processes discovered");
  x.sample("steptrace_discovered_processes_total", host_labels({}), static_cast<double>(discovered_total_));
  x.family("steptrace_cap_hits_total", "counter", "Times a hard memory cap was hit");
  for (const char* c : {"processes", "series", "window_events"})
    x.sample("steptrace_cap_hits_total", host_labels({{"cap", c}}), static_cast<double>(cap_hits_[c]));
  x.family("steptrace_windows_total", "counter", "Analysis windows closed, by reason");
  for (const char* c : {"timer", "event_cap", "tracer_rebuild", "level_change"})
    x.sample("steptrace_windows_total", host_labels({{"reason", c}}), static_cast<double>(window_closes_[c]));
  x.family("steptrace_flight_recorder_bytes", "gauge", "Memory held by the flight recorder");
  x.sample("steptrace_flight_recorder_bytes", host_labels({}), static_cast<double>(flight_.bytes()));
  x.family("steptrace_flight_recorder_records", "gauge", "Raw records held by the flight recorder");
  x.sample("steptrace_flight_recorder_records", host_labels({}), static_cast<double>(flight_.records()));
  x.family("steptrace_dumps_total", "counter", "Flight-recorder captures written, by trigger");
  for (const char* c : {"signal", "control", "slow_step", "step_time_change", "hang"})
    x.sample("steptrace_dumps_total", host_labels({{"reason", c}}), static_cast<double>(dumps_ok_[c]));
  x.family("steptrace_dump_failures_total", "counter", "Flight-recorder captures that failed or were rate-limited");
  x.sample("steptrace_dump_failures_total", host_labels({}), static_cast<double>(dump_failures_));
  x.family("steptrace_config_reloads_total", "counter", "SIGHUP reloads, by result");
  x.sample("steptrace_config_reloads_total", host_labels({{"result", "ok"}}), static_cast<double>(reload_ok_));
  x.sample("steptrace_config_reloads_total", host_labels({{"result", "error"}}), static_cast<double>(reload_err_));
}

}  // namespace steptrace::daemon
