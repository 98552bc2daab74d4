// SPDX-License-Identifier: Apache-2.0
// Everything downstream of decode, fed in timestamp order. Live tracing and
// replay of a capture drive the same Analysis, so both produce the same report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attribution/job_analysis.h"
#include "decode/decoder.h"
#include "capture/drop_stats.h"
#include "capture/attach_tier.h"
#include "timeline/collector_stats.h"
#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"

namespace steptrace {

struct Analysis {
  ThreadTable threads;
  CollectorStats collectors;
  TimelineStore timeline;
  const signals::SignalsData* device_signals = nullptr;  // set by the session for finish()

  void on_event(const Event& e) {
    threads.on_event(e);
    collectors.on_event(e);
    timeline.on_event(e, &threads);  // the state machine: totals come from its segments
  }
  // Close the window and run steps -> attribution -> verdict.
  JobAnalysis finish(uint64_t end_ns, const DropStats& drops) {
    timeline.finish(end_ns, &threads);
    AnalysisOptions opt;
    opt.device_signals = device_signals;
    return analyze_job(timeline, threads, drops, opt);
  }
};

// What a finished session knows: the analysis plus how the tracing went.
struct SessionReport {
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
  bool incomplete() const { return drops.incomplete() || !capture_end.empty(); }
};

// A capture that did not end complete: the verdict covers only what it holds.
inline void mark_capture_end(SessionReport& r) {
  if (r.capture_end.empty()) return;
  r.job.verdict.incomplete = true;
  r.job.verdict.evidence.push_back("INCOMPLETE: the capture ended early (" + r.capture_end + ")");
}

}  // namespace steptrace
