// SPDX-License-Identifier: Apache-2.0
// Inside the daemon (daemon.h draws the picture): one Daemon object on the
// main thread, its methods split by concern over
//   daemon.cpp       start-up, the main loop, reload, signals
//   tracer_host.cpp  the tracer and the degradation levels it runs at
//   targets.cpp      which processes are traced: discovery, descendants, probed libraries
//   windows.cpp      closing analysis windows into the per-rank series; the CPU budget sample
//   metrics.cpp      the Prometheus exposition of all of it
//   dumps.cpp        flight-recorder captures on demand and on slow steps
//   control.cpp      the control socket's requests (dump, reload, level)
// and, each on its own thread, the HTTP endpoint (http_server.h, read-only),
// the control socket (control_socket.h) and the dump worker (dump_worker.h).
// Not for use outside user/daemon.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/bpf_stats_duty.h"
#include "daemon/budget.h"
#include "daemon/config.h"
#include "daemon/control_socket.h"
#include "daemon/discovery.h"
#include "daemon/dump_worker.h"
#include "daemon/exposition.h"
#include "daemon/flight_recorder.h"
#include "daemon/http_server.h"
#include "loader/dev_files.h"
#include "loader/drain_wait.h"
#include "loader/features.h"
#include "loader/ring_reader.h"
#include "loader/tracer.h"
#include "loader/tracer_setup.h"
#include "attribution/change_points.h"
#include "pipeline/pipeline.h"
#include "signals/sampler_thread.h"
#include "session/session.h"
#include "steptrace_abi.h"
#include "util/clock_anchor.h"
#include "util/self_usage.h"

namespace steptrace::daemon {

// Set by the signal handlers (daemon.cpp), read by the main loop.
extern std::atomic<bool> g_stop;
extern std::atomic<bool> g_reload;
extern std::atomic<bool> g_dump;

inline constexpr double kBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
inline constexpr size_t kNumBuckets = sizeof(kBuckets) / sizeof(kBuckets[0]);
inline constexpr size_t kStepHistory = 4096;   // step durations kept for the p99 of the auto-dump trigger
inline constexpr size_t kMinHistory = 100;     // no automatic dump before this many steps
inline constexpr size_t kChangeHistory = 1024;  // steps per rank searched for a change in step time
// A record that finds the ring this full wakes the drain (as a session's --ring-wake-pct 25).
inline constexpr double kRingWakeFill = 0.25;

uint64_t rss_bytes();
std::string hostname();
double now_s();
st_proc_agg operator+(const st_proc_agg& a, const st_proc_agg& b);

// One series per (training job, rank): a restarted rank (a new pid) goes on
// counting in the same series, so no label changes with the process.
struct RankSeries {
  std::string job, rank;
  std::string node;  // the launcher's node rank ("" when it says none: no node label)
  uint32_t pid_num = 0;  // the latest process with this rank
  // Every process seen with this rank while the series lives: who it is and
  // the last window it had steps in (steptrace_rank_info, one sample each).
  struct Proc {
    std::string comm, pod, pod_namespace, container;
    uint64_t last_window = 0;
  };
  std::map<uint32_t, Proc> procs;
  std::array<double, kCategories> cat_s{};
  // What the host took from the steps (attribution/host_steals.h), seconds
  // by steptrace_host_steal_seconds_total's cause label (kStealLabels).
  std::array<double, 6> steal_s{};
  void add_steals(const StepResult& st) {
    const uint64_t stolen[] = {st.throttled_ns, st.data_throttled_ns, st.data_reclaim_ns,
                               st.reclaim_ns,   st.irq_ns,            st.softirq_ns};
    for (size_t i = 0; i < steal_s.size(); ++i) steal_s[i] += static_cast<double>(stolen[i]) / 1e9;
  }
  std::array<uint64_t, kNumBuckets> buckets{};
  double sum_s = 0;
  uint64_t count = 0;
  uint64_t straggler_steps = 0;
  // How late it arrived at the collective after this host's earliest rank,
  // over the steps a collective coupled (attribution/cross_rank.h).
  double late_s = 0;
  // EFA control path (uverbs calls), inside steps and outside them.
  uint64_t efa_calls[2] = {};
  double efa_s[2] = {};
  uint64_t last_window = 0;
  // The latest counted steps with detail (bounded), for change points
  // (daemon/regressions.cpp); trimmed to the new level after each change.
  std::deque<SeriesPoint> recent;
};

// The last change in step time of a training job (daemon/regressions.cpp).
struct JobChange {
  uint64_t total[2] = {};  // faster, slower
  ChangePoint last;
  std::string cause_rank;  // the rank label of last.cause_rank
  double wall_s = 0;       // unix time of last.at_ns
};

// In-kernel per-process counters (levels aggregated and up), per traced
// process; exported summed by (training job, rank, comm), see AggKey.
struct ProcAggSeries {
  std::string job, rank, comm;
  st_proc_agg base{};  // counts of replaced tracers and of keys already deleted
  st_proc_agg cur{};   // base + the live map's value
  double gone_at_s = 0;  // when the process was found gone; 0 while alive
};

using AggKey = std::tuple<std::string, std::string, std::string>;  // job, rank, comm
inline AggKey agg_key(const ProcAggSeries& s) { return {s.job, s.rank, s.comm}; }


class Daemon {
 public:
  Daemon(DaemonConfig cfg, int argc, char** argv) : cfg_(std::move(cfg)), argc_(argc), argv_(argv),
      flight_(0, 0), budget_(cfg_.max_cpu_percent) {}
  ~Daemon();
  Status start();
  int run();

 private:
  Status build_tracer();
  void drop_tracer();
  void apply_level(int level, const char* why);
  void enter_level(int level);
  uint32_t wanted_subsystems() const;
  bool detail_wanted() const;
  void apply_detail();
  void read_aggregates(bool tracer_going);
  void retire_agg(const ProcAggSeries& s);
  void on_record(const void* data, size_t len);
  void on_raw_record(const st_event_header& h, const void* data, size_t len);  // pipeline observer
  void resolve_accel_devs(bool first_time);
  void discover();
  void track(uint32_t pid, bool log_it);
  bool add_target(uint32_t pid);
  void retry_untraced();
  void note_new_process(uint32_t pid);
  void note_device_call(uint32_t pid);
  void note_parent(uint32_t child, uint32_t parent);
  void seed_parents();
  void scan_for_libs();
  void attach_lib(const std::string& path);
  void attach_mapped_lib(uint32_t pid, const MappedLib& lib);
  void close_window(uint64_t now, const char* reason);
  void publish(const JobAnalysis& ja, bool detail);
  // Change points in each training job's step series: log, count, dump.
  void watch_for_changes();
  void render_change_metrics(Exposition& x) const;
  // Steps that stop ending (session/hang_watch.h): log, count, dump.
  void check_hang(uint64_t now);
  void sample_cpu();
  void sleep_before_drain();
  void start_device_signals();
  void tick_device_signals();  // the tracked processes to the sampler
  // The device counters of the flight recorder's span, as capture notes.
  std::vector<std::vector<uint8_t>> signal_notes(uint64_t from_ns, uint64_t now) const;
  void render_metrics();
  void render_step_metrics(Exposition& x) const;
  void render_process_metrics(Exposition& x) const;
  void render_loss_metrics(Exposition& x);
  void render_cost_metrics(Exposition& x) const;
  void render_housekeeping_metrics(Exposition& x);
  Labels host_labels(Labels l) const;
  Status reload();
  void apply_runtime_config();
  bool bpf_stats_enabled() const;  // BPF_ENABLE_STATS fd or kernel.bpf_stats_enabled=1
  void publish_metrics();
  void handle_dumps();
  void handle_control();
  std::string set_level_floor(const std::string& arg, bool* ok);
  void render_control_metrics(Exposition& x) const;
  // Manual dumps (SIGUSR1, the control socket): rate-limited, then start_dump.
  Status request_manual_dump(const std::string& trigger, const std::string& note,
                             std::shared_ptr<ControlRequest> waiter);
  // Copies the flight recorder and hands it to the dump worker; `waiter`
  // (may be null) is answered when the capture is written.
  Status start_dump(const std::string& trigger, const std::string& note, std::shared_ptr<ControlRequest> waiter);
  void finish_dump(const DumpOutcome& o);
  Status prepare_dump_dir();
  nlohmann::json capture_meta(const std::string& trigger, const std::string& note) const;
  DropStats cumulative_drops() const;

  DaemonConfig cfg_;
  int argc_;
  char** argv_;
  std::string host_;
  KernelFeatures features_;
  HostDevices host_devices_;
  uint32_t base_subsystems_ = 0;
  uint32_t active_subsystems_ = 0;
  uint32_t drain_ms_ = 10;

  std::unique_ptr<BpfTracer> tracer_;
  std::unique_ptr<RingReader> reader_;
  // The sleep between drains (loader/drain_wait.h): drain_ms_ while records
  // come, a forced wake-up when the ring is a quarter full, the idle interval
  // after a second of none. Null when it could not be made: a plain sleep.
  std::unique_ptr<DrainWait> wait_;
  // The device counters (null with device_counters = false), sampled on
  // their own thread: a window's analysis can hold this one for longer than
  // a step. Each window's analysis reads a copy taken as it closes
  // (signals_seen_); dumps carry a copy as notes.
  std::unique_ptr<signals::SamplerThread> sampler_;
  signals::SignalsData signals_seen_;
  size_t last_drained_ = 0;
  BpfStatsDuty stats_;  // BPF run-time statistics, on one second in cfg_.bpf_stats_every_s
  Pipeline pipe_;             // decode -> reorder -> analysis, one window at a time
  bool window_open_ = false;  // a window is being gathered (from the first tracer on)
  uint64_t window_start_ns_ = 0, window_no_ = 0;
  // Per-event detail was on for the whole current window (sampled: 1 of
  // every sample_every windows since the level was entered).
  bool window_detail_ = true;
  bool bpf_detail_ = false;        // what the current tracer's programs were told
  bool detail_since_sample_ = true;  // some window since the last CPU sample had detail
  uint64_t detail_since_ns_ = 0;   // when they last turned detail on
  DetailCycle cycle_;
  int applied_level_ = 0;
  uint64_t detail_windows_[2] = {0, 0};  // closed windows without / with detail
  std::map<uint32_t, ProcAggSeries> agg_;
  // Counts of processes whose agg_ entry was dropped, per exported label set
  // (job, rank, comm), while other processes still count in that set: the
  // sum stays monotonic. Dropped with the last process of the set.
  std::map<AggKey, st_proc_agg> agg_retired_;
  DropStats drops_window_start_{};
  // Processes the kernel's target set refused (add_target failed): counted
  // once per pid, by cause, retried at every discovery scan while they live.
  std::set<uint32_t> untraced_;
  std::map<std::string, uint64_t> target_add_failures_;  // cause -> processes refused
  uint64_t target_add_failed_total_ = 0, window_target_add_failed_ = 0;
  bool window_incomplete_ = false;  // the last closed window had drops or losses
  int exit_code_ = 0;               // non-zero: stopped because it could not trace
  DropStats drops_base_{};           // counters of tracers that were replaced
  uint64_t bpf_base_ns_ = 0, bpf_base_cnt_ = 0;  // run time and runs of tracers that were replaced
  std::map<std::string, double> prog_base_s_;
  DevFileSet dev_files_;

  ProcScanner scanner_;
  std::map<uint32_t, ProcIdentity> tracked_;  // accelerator holders and their followed descendants' roots
  std::map<uint32_t, ProcIdentity> identity_cache_;
  // Fork relations of traced processes. Each window's Analysis starts empty, and
  // analyze_job finds a rank's DataLoader workers through them: they are replayed
  // into every new window as fork events.
  std::map<uint32_t, uint32_t> parents_;
  LibScanQueue lib_scan_;
  DeviceCallRescans device_call_rescans_;  // a runtime dlopened after the exec's scans
  std::set<std::string> probed_libs_;
  std::vector<std::string> known_libs_;  // re-attached when the tracer is rebuilt
  uint64_t next_discover_ns_ = 0;

  FlightRecorder flight_;
  // Clock anchors taken every kClockAnchorEveryNs, as long back as the
  // flight recorder keeps records: a dump carries them, so captures of one
  // job from several hosts' daemons line up as recorded ones do.
  std::deque<ClockAnchor> anchors_;
  uint64_t next_anchor_ns_ = 0;
  void keep_clock_anchor(uint64_t now);
  BudgetController budget_;
  double last_cpu_total_ = 0, last_sample_s_ = 0;
  CpuTimes cpu_{};
  double bpf_now_s_ = 0;  // BPF seconds counted so far: measured seconds, and the rate carried between them

  std::map<std::string, RankSeries> series_;
  std::deque<double> step_history_;
  std::map<std::string, JobChange> changes_;  // by training job
  HangWatch hang_;
  uint64_t hangs_total_ = 0;
  Verdict verdict_;
  bool have_verdict_ = false;
  // The straggler of the last detailed window: its rank as the rank label
  // writes it when that is a number (RANK), else its position; -1 when none.
  int straggler_rank_ = -1;

  // Counters.
  uint64_t discovered_total_ = 0, degradations_ = 0, windows_total_ = 0;
  std::map<std::string, uint64_t> cap_hits_, dumps_ok_, window_closes_;
  uint64_t dump_failures_ = 0, reload_ok_ = 0, reload_err_ = 0;
  double last_auto_dump_s_ = -1e18, last_manual_dump_s_ = -1e18;
  std::map<std::string, uint64_t> control_requests_;  // "verb result" -> requests answered

  MetricsServer http_;
  ControlServer control_;
  DumpWorker dump_worker_;
  std::shared_ptr<ControlRequest> dump_waiter_;  // the request the capture in hand answers
};


}  // namespace steptrace::daemon
