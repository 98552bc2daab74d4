// SPDX-License-Identifier: Apache-2.0
// The one path from raw records to an analysis, shared by live tracing
// (session/), replay of a capture (pipeline/replay.cpp) and the daemon:
//
//   push(bytes) -> decode -> reorder -> advance() -> Analysis (threads,
//   collectors, timelines) -> close(end, drops) -> steps -> attribution -> verdict
//
// It is windowed: close_window() returns the finished window's analysis and
// starts an empty one, keeping the decoder and the events still held back for
// ordering, so a long-running consumer forgets what it no longer needs.
// The pipeline never touches the kernel: drivers own the ring reader and
// the drop counters and hand both in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "capture/reorder.h"
#include "decode/decoder.h"
#include "pipeline/analysis.h"
#include "util/sys_root.h"

namespace steptrace {

class Pipeline {
 public:
  // Before the first record: how the analysis stays bounded.
  void set_windows(const WindowPolicy& p) {
    policy_ = p;
    analysis_.ledger = StepLedger(p.keep_steps);
  }
  WindowStats window_stats() const;

  // Sees every record before decode (a raw view: exec events start a
  // library scan, fork events feed the daemon's parent map).
  using RecordObserver = std::function<void(const st_event_header& h, const void* data, size_t len)>;

  void set_observer(RecordObserver fn) { observer_ = std::move(fn); }
  // Told after each fold the time before which the analysis forgot its
  // timeline (the session trims the device samples it keeps to match).
  void set_fold_observer(std::function<void(uint64_t keep_from)> fn) { fold_observer_ = std::move(fn); }
  // Told before a fold (true) and after it and its observer (false): the
  // session keeps the kernel ring drained from another thread meanwhile.
  void set_fold_guard(std::function<void(bool folding)> fn) { fold_guard_ = std::move(fn); }

  // One record from the ring buffer or a capture file.
  void push(const void* data, size_t len);
  // Deliver the events old enough to be in order (call after each drain).
  void advance();
  // Deliver everything still held back (the end of the input).
  void flush();

  Analysis& analysis() { return analysis_; }
  const Analysis& analysis() const { return analysis_; }

  // Threads seen without a comm event: name them from /proc while they live.
  void name_threads(const SysRoot& root);

  // Close the window at end_ns: steps -> attribution -> verdict over what
  // has been delivered. The analysis stays (sinks read its threads and timelines).
  JobAnalysis close(uint64_t end_ns, const DropStats& drops) { return analysis_.finish(end_ns, drops); }
  // Close the window and start an empty one; events held back for ordering
  // go to the next window. The device-signal source carries over.
  JobAnalysis close_window(uint64_t end_ns, const DropStats& drops);
  // Start an empty window without closing the current one (its analysis is dropped).
  void start_window();
  // The finished analysis, for a report (the pipeline is spent afterwards).
  Analysis take_analysis() { return std::move(analysis_); }
  // A new input (a rebuilt tracer): fresh decoder and ordering, empty
  // window. Counters (records, late, decode stats) stay cumulative.
  void restart();

  // The kernel's records pushed (what the ring's drop counters account for);
  // the session's own user notes are counted apart.
  uint64_t records() const { return records_; }
  uint64_t notes() const { return notes_; }
  uint64_t window_records() const { return window_records_; }
  uint64_t late() const { return late_base_ + reorder_.late(); }
  DecodeStats decode_stats() const;
  uint64_t newest_ts() const { return newest_ts_; }  // newest decoded record's timestamp

 private:
  void maybe_fold();

  WindowPolicy policy_;
  uint64_t released_ts_ = 0, last_fold_ts_ = 0, last_check_ts_ = 0;
  uint64_t folds_ = 0, cap_hits_ = 0, cap_forgets_ = 0, peak_bytes_ = 0, early_folds_ = 0;
  Decoder decoder_;
  Reorderer reorder_;
  Analysis analysis_;
  RecordObserver observer_;
  std::function<void(uint64_t)> fold_observer_;
  std::function<void(bool)> fold_guard_;
  uint64_t records_ = 0, notes_ = 0, window_records_ = 0, late_base_ = 0, newest_ts_ = 0;
  DecodeStats decode_base_{};
};

}  // namespace steptrace
