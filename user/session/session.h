// SPDX-License-Identifier: Apache-2.0
// One tracing session: preflight, load/attach, targets, the drain loop and the
// final report. `steptrace run` and `attach` are thin wrappers; the [root]
// integration tests drive a Session directly.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/capture_file.h"
#include "loader/ring_keeper.h"
#include "loader/ring_reader.h"
#include "cli/options.h"
#include "loader/dev_files.h"
#include "loader/drain_wait.h"
#include "loader/features.h"
#include "loader/tracer.h"
#include "pipeline/pipeline.h"
#include "session/hang_watch.h"
#include "pipeline/replay.h"
#include "session/job_control.h"
#include "signals/device_signals.h"
#include "util/clock_anchor.h"
#include "util/mono_clock.h"
#include "util/sys_root.h"
#include "session/lib_probes.h"
#include "session/symbol_worker.h"

namespace steptrace {

// A copy of a live session's state for `top`: analysed off the drain thread.
struct LiveSnapshot {
  SessionReport report;
  std::unique_ptr<signals::SignalsData> signals;  // the device samples, copied
};

class Session {
 public:
  // Checks privileges/BTF, resolves targets and devices, loads and attaches.
  // For `run`, the job is spawned held at a gate and released once traced.
  static Result<std::unique_ptr<Session>> start(const Options& o, const SysRoot& root = SysRoot());
  ~Session();

  // One drain of the ring buffer through decode -> reorder -> analysis.
  Status poll();
  // Loop until the session is done(); a signal number stored in *signal
  // (by the caller's handler) is a stop request: request_stop(sig).
  Status run_loop(std::atomic<int>* signal);
  // What is traced, for the line printed when tracing starts.
  std::string banner() const;
  // "12.3 s, 1234567 events, 0 dropped, 45.6 MiB written": record's progress line.
  std::string progress_text() const;
  // Called by run_loop about once a second (record's progress line on a TTY).
  void set_ticker(std::function<void()> fn) { ticker_ = std::move(fn); }
  // End the session: with a launched job, `sig` goes to its process tree
  // and tracing goes on while it shuts down (session/job_control.h); in
  // attach mode, or with --keep-running, tracing ends at the next done().
  void request_stop(int sig, std::string reason);
  // Final drain, counters, close the window.
  Result<SessionReport> finish();
  // Live view (`steptrace top`, session_live.cpp): a copy of the analysis so
  // far (one window of timeline and the folded steps: bounded) and of the
  // device samples it reads, taken on the drain thread ...
  Result<LiveSnapshot> snapshot() const;
  // ... and closed at the copy's time and run through the same steps ->
  // attribution -> verdict as finish(), on any thread: it shares nothing
  // with the session.
  static void analyse(LiveSnapshot& s);
  // True when tracing should end: the job exited (or, once a stop was asked,
  // its whole tree is gone), or the duration elapsed in attach mode. Also
  // turns the end of the duration into a stop request.
  bool done();
  // The sleep before the next drain: --drain-ms while records come, longer
  // once they stop (loader/drain_wait.h), none after a drain cut at its bound.
  void sleep_before_drain();
  // When the device counters want the next poll (CLOCK_MONOTONIC; UINT64_MAX: no sample on a clock).
  uint64_t next_sample_due_ns() const { return signals_ ? signals_->next_due_ns() : UINT64_MAX; }

  // "" while tracing; once a stop was asked, what the session waits for.
  std::string stop_status() const;

  const KernelFeatures& features() const { return features_; }
  std::optional<pid_t> job_pid() const;

 private:
  Session() = default;
  // Runtime library / step marker discovery: uprobes once per library file.
  void note_new_process(uint32_t pid);
  void scan_for_libs();
  void attach_lib(const std::string& path);  // probed up front, by a path of this host
  void attach_mapped_lib(uint32_t pid, const MappedLib& lib);
  // Who the process is (container, pod, launcher): a user note, when it says anything.
  void note_identity(uint32_t pid);
  Status add_seeds(const SysRoot& root, const std::vector<uint32_t>& seed);
  // The device counters sampler (signals/device_signals.h), and what a fold tells it.
  void start_device_signals(const Options& o, const SysRoot& root);
  void emit_note(uint32_t pid, const nlohmann::json& body);
  // Takes a clock anchor, queues its note and schedules the next (util/clock_anchor.h).
  ClockAnchor note_clock_anchor();
  void write_signal_notes(bool final);
  void flush_notes();
  void on_record(const void* data, size_t len);
  nlohmann::json capture_meta() const;
  Status launch_job(const SysRoot& root);

  Options opts_;
  SysRoot root_;
  KernelFeatures features_;
  std::unique_ptr<BpfTracer> tracer_;
  std::unique_ptr<RingReader> reader_;
  std::unique_ptr<RingKeeper> keeper_;  // drains reader_ while a fold holds the drain thread (after reader_: gone first)
  std::unique_ptr<DrainWait> wait_;  // the sleep between drains (null: plain timer)
  size_t last_drained_ = 0;          // records the last drain consumed
  bool watching_devs_ = false;       // wait_ watches for named device files
  std::unique_ptr<signals::DeviceSignals> signals_;  // NDS / EFA / Neuron sysfs sampler (drain ticks)
  SignalNoteWriter signal_notes_;                      // its samples, as the capture's notes
  std::optional<JobControl> job_;
  bool stop_requested_ = false;   // attach mode (no job), or --keep-running
  uint64_t alive_checked_ns_ = 0; // attach -p: when the traced processes were last looked for
  bool any_target_alive() const;
  bool duration_over_ = false;
  std::string end_reason_;         // why tracing ended ("duration", "signal SIGINT"...): report and trailer
  std::unique_ptr<CaptureWriter> writer_;
  bool write_failed_ = false;
  Pipeline pipe_;         // decode -> reorder -> analysis
  std::unique_ptr<SymbolWorker> symbols_;  // names for the stack samples (null: sampling off)
  SessionReport report_;  // how the tracing went (the analysis joins it at finish)
  DevFileSet dev_files_;
  LibScanQueue scan_;
  std::set<std::string> probed_libs_;  // by MappedLib::key() (the inode), else by path
  std::vector<std::vector<uint8_t>> pending_notes_;
  DeviceCallRescans device_call_rescans_;  // a runtime dlopened after the exec's scans
  void note_device_call(uint32_t pid);
  bool exec_wake_ = false;     // a target's exec wakes the drain (BpfTracer::arm_exec_wakeup)
  size_t seed_count_ = 0;      // processes traced from the start (attach, record -p/--cgroup, top)
  size_t identity_reads_ = 0;  // note_identity's /proc reads so far (capped)
  std::function<void()> ticker_;
  uint64_t last_tick_ns_ = 0;
  uint64_t next_clock_anchor_ns_ = 0;  // when poll() takes the next clock anchor (util/clock_anchor.h)
  uint64_t start_mono_ns_ = 0;
  double start_cpu_s_ = 0;
  bool finished_ = false;
  HangWatch hang_;  // steps that stop ending (--hang-after)
  void check_hang();
  // Drops said on stderr as they happen, with the longest wait between drains.
  uint64_t last_poll_ns_ = 0, max_drain_gap_ns_ = 0, drops_checked_ns_ = 0, drops_warned_ns_ = 0, drops_warned_ = 0;
  uint64_t drained_since_drop_check_ = 0;  // records: none means nothing could have been dropped
  uint64_t fill_wakeups_ = 0;              // drains a filling ring woke before the timer (ring_wake_fill)
  void check_drops();
};


// Paths of libnrt.so* and libsteptrace_marker.so* in a /proc/PID/maps text.
std::vector<std::string> find_probe_libs(const std::string& maps);
// libnrt / step-marker libraries a program links against (resolved by ld.so).
std::vector<std::string> resolve_needed_libs(const std::string& cmd);

}  // namespace steptrace
