// SPDX-License-Identifier: Apache-2.0
// Everything downstream of decode, fed in timestamp order. Live tracing and
// replay of a capture drive the same Analysis, so both produce the same report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attribution/job_analysis.h"
#include "decode/decoder.h"
#include "capture/drop_stats.h"
#include "capture/attach_tier.h"
#include "pipeline/clock_notes.h"
#include "pipeline/process_notes.h"
#include "pipeline/signal_notes.h"
#include "profile/cpu_samples.h"
#include "timeline/collector_stats.h"
#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"
#include "timeline/socket_ids.h"
#include "timeline/stream_marks.h"
#include "pipeline/step_ledger.h"
#include "pipeline/hang_report.h"

namespace steptrace {

// How a long session stays bounded: every fold_every_ns of trace time the
// analysis folds the steps that are over and forgets the timeline before
// them (Analysis::fold). A window whose timeline holds more than
// fold_above_bytes folds early (a busy job's 10 s made 60 MiB of segments,
// most of steptrace's RSS; nothing is lost, the window is only shorter).
// Above max_memory_bytes it folds at once; if the window alone is still
// above, the window's detail is forgotten (counted: its open steps are lost).
struct WindowPolicy {
  uint64_t fold_every_ns = 0;   // 0: never (the whole session stays in memory)
  size_t max_memory_bytes = 0;  // 0: no cap
  size_t keep_steps = 4096;     // steps per rank kept in detail once folded
  size_t fold_above_bytes = 0;  // 0: windows end on time only; with fold_every_ns only

  static constexpr size_t kFoldAboveBytes = size_t{16} << 20;

  static WindowPolicy from(double window_s, uint64_t max_memory_bytes, uint32_t keep_steps) {
    const auto every = static_cast<uint64_t>(window_s * 1e9);
    return {every, static_cast<size_t>(max_memory_bytes), keep_steps, every ? kFoldAboveBytes : 0};
  }
};

struct WindowStats {
  uint64_t fold_every_ns = 0;
  uint64_t max_memory_bytes = 0;
  uint64_t folds = 0;                // windows whose steps were folded
  uint64_t memory_cap_hits = 0;      // folds brought forward by the cap
  uint64_t early_folds = 0;          // folds brought forward by fold_above_bytes
  uint64_t memory_cap_forgets = 0;   // windows forgotten whole at the cap (steps lost)
  uint64_t steps_out_of_detail = 0;  // folded steps no longer kept in detail (counted in the totals)
  uint64_t peak_memory_bytes = 0;    // the largest estimate seen at a check
};

struct Analysis {
  ThreadTable threads;
  CollectorStats collectors;
  TimelineStore timeline;  // one window of it once fold() has run
  StepLedger ledger;       // the steps folded out of the timeline
  SocketIds sockets;       // kernel socket ids -> connection keys
  ProcessNotes notes;      // who each process is, where its runtime was probed
  ClockAnchors clock;      // where the trace's clock stood against the wall clock (clock notes)
  SampleStore samples;     // on-CPU stack samples (this window's) and every stack seen
  StreamMarks streams;     // TCP calls' places in their byte streams, kept only when enabled (a merge)
  // Samples of folded windows, classified and counted (CpuProfile::folded).
  std::map<ProfileKey, uint64_t> profile_folded;
  const signals::SignalsData* device_signals = nullptr;  // set by the session for finish()
  // A replay's device counters, from the capture's signals notes; then
  // device_signals points at them. Shared: they outlive a window (Pipeline).
  std::shared_ptr<SignalNoteReader> replayed_signals;

  void on_event(const Event& raw) {
    const Event& e = sockets.rekey(raw);
    threads.on_event(e);
    collectors.on_event(e);
    timeline.on_event(e, &threads);  // the state machine: totals come from its segments
    if (streams.enabled()) streams.on_event(raw);
  }
  // A user note (capture/user_note.h): identities and probes go to notes; a
  // running process's parent, read from /proc at attach, to the timeline.
  void on_note(uint32_t pid, const nlohmann::json& note) {
    notes.on_note(pid, note);
    if (auto ppid = parent_in_note(note)) timeline.note_parent(pid, *ppid);
    if (auto t = note.find("note"); t != note.end() && *t == "symbols") add_symbol_note(note);
    if (auto a = anchor_in_note(note)) clock.add(*a);
    if (is_signal_note(note)) on_signal_note(note);
  }
  void on_signal_note(const nlohmann::json& note);
  // A "symbols" note: names of sampled addresses ([[pid, ip, name]...]).
  void add_symbol_note(const nlohmann::json& note);
  // Close the window and run steps -> attribution -> verdict, over the steps
  // folded earlier and this window's.
  JobAnalysis finish(uint64_t end_ns, const DropStats& drops);
  // What finish() would say at end_ns, with the session going on: the window
  // is analysed in place (TimelineStore::FinishedView), the thread totals on
  // a copy, and nothing changes. `signals`: the device signals to join (or none).
  JobAnalysis peek(uint64_t end_ns, const DropStats& drops, const signals::SignalsData* signals);
  // The same, the steps stage alone (AnalysisOptions::steps_only): the ranks
  // and their steps, folded ones included, nothing attributed. What the hang
  // watch probes with every few seconds: a whole analysis there was a third
  // of a busy session's CPU (issue 19).
  JobAnalysis peek_steps(uint64_t end_ns);
  // A long session: analyse the window in place, fold the steps that are
  // over at now_ns into the ledger, and forget the timeline before them.
  // Returns the time before which the timeline was forgotten (0: nothing
  // could be folded yet, no step is over).
  uint64_t fold(uint64_t now_ns);
  // What the analysis holds, estimated from its containers.
  size_t memory_bytes() const;

 private:
  // The options of this window's analysis: each folded rank resumes at its
  // cut, the device signals given and the stack samples (sorted here).
  AnalysisOptions window_options(const signals::SignalsData* signals);
  // steps -> attribution -> verdict over the closed window (timeline) and
  // the thread totals `th`, joined with the folded steps.
  JobAnalysis analyse_closed(const ThreadTable& th, const DropStats& drops, const signals::SignalsData* signals);
};

// Where a report's data came from, so outputs from a fleet can be told apart
// and lined up with other tools' traces (PyTorch profiler, neuron-profile).
struct Provenance {
  std::string host, kernel;
  std::string recorded_by;  // the steptrace version that traced (a capture's, on replay)
  std::string boot_id;      // /proc/sys/kernel/random/boot_id: monotonic times compare only within one boot
  // Wall time = CLOCK_MONOTONIC + this (read at the start of tracing); 0 when unknown.
  int64_t realtime_minus_monotonic_ns = 0;
};

// What a finished session knows: the analysis plus how the tracing went.
struct SessionReport {
  Provenance source;
  Analysis analysis;
  JobAnalysis job;
  DecodeStats decode;
  DropStats drops;
  std::vector<AttachTier> tiers;
  std::vector<std::string> warnings;
  std::vector<std::string> runtime_libs;  // libraries probed with uprobes
  uint64_t window_start_ns = 0, window_end_ns = 0;
  uint64_t records = 0;
  uint64_t late_records = 0;
  WindowStats windows;  // how the session stayed bounded
  std::vector<HangReport> hangs;  // live sessions: times the steps stopped (session/hang_watch.h)
  double tracer_cpu_s = 0;
  double wall_s = 0;
  uint32_t ring_mib = 0, drain_ms = 0;
  int job_exit_code = -1;  // run: the job's exit status
  std::string job_outcome;  // run: how the job ended ("exited 0 (after the stop request)", ...)
  std::string end_reason;   // why tracing ended: "job exited", "duration", "signal SIGINT", "quit", ...
  // record/report: how the capture ended when not complete ("max_size",
  // "write_error: <strerror>", "cut short: no trailer"...); empty otherwise.
  std::string capture_end;
  // record: the capture could not be written in full (steptrace exits non-zero).
  std::string capture_error;
  // Events dropped, traced work left unattributed by a loss, or a capture cut short.
  bool incomplete() const { return drops.incomplete() || !capture_end.empty() || windows.memory_cap_forgets > 0; }
};

// Windows forgotten whole at the memory cap: their open steps are lost.
inline void mark_window_losses(SessionReport& r) {
  if (!r.windows.memory_cap_forgets) return;
  r.job.verdict.incomplete = true;
  r.job.verdict.evidence.push_back("INCOMPLETE: the memory cap (--max-memory " +
                                   std::to_string(r.windows.max_memory_bytes >> 20) + " MiB) forgot " +
                                   std::to_string(r.windows.memory_cap_forgets) +
                                   " window(s) whole; the steps open in them are lost");
}

// A capture that did not end complete: the verdict covers only what it holds.
inline void mark_capture_end(SessionReport& r) {
  if (r.capture_end.empty()) return;
  r.job.verdict.incomplete = true;
  r.job.verdict.evidence.push_back("INCOMPLETE: the capture ended early (" + r.capture_end + ")");
}

}  // namespace steptrace
