// SPDX-License-Identifier: Apache-2.0
// The dump worker: one thread that writes flight-recorder captures (zlib
// compression, fsync, rename) so that the main loop keeps draining the ring
// buffer meanwhile. One capture at a time: the main loop hands over a
// snapshot it copied and takes the outcome back (it answers the request that
// asked, and counts). After each capture the dump directory keeps the newest
// kMaxDumpFiles of each trigger, so requested dumps never rotate away the
// automatic slow-step ones.
//
// The worker's CPU is in the process's getrusage (steptrace_tracer_cpu_seconds_total)
// but not in the CPU budget: cpu_seconds() is subtracted before the budget
// sample, so a dump does not push the degradation ladder down. Dumps are
// rate-limited instead (dump_min_interval_seconds).
#pragma once

#include <ctime>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "capture/drop_stats.h"
#include "daemon/flight_recorder.h"

namespace steptrace::daemon {

inline constexpr size_t kMaxDumpFiles = 16;  // per trigger: the oldest captures of a trigger are removed

struct DumpJob {
  std::string trigger;  // signal, control, slow_step: in the file name, the retention class
  std::string path;
  std::string dump_dir;
  FlightSnapshot snapshot;
  // User notes (capture/user_note.h) written before the snapshot's records
  // and after them: the clock anchors of its span, and one taken as it was cut.
  std::vector<std::vector<uint8_t>> head_notes, tail_notes;
  nlohmann::json meta;
  DropStats drops{};
  uint64_t end_ns = 0;
};

struct DumpOutcome {
  std::string trigger;
  std::string path;
  std::string error;  // empty: written
  uint64_t records = 0;
  double seconds = 0;  // wall time of the write
};

class DumpWorker {
 public:
  DumpWorker() = default;
  ~DumpWorker();  // finishes the capture in hand, then stops
  DumpWorker(const DumpWorker&) = delete;
  DumpWorker& operator=(const DumpWorker&) = delete;

  void start();
  // A capture was handed over and its outcome not taken yet.
  bool busy() const;
  // Hands over a capture; false (and nothing done) while busy or not started.
  bool submit(DumpJob job);
  // The outcome of the capture in hand once it is written (non-blocking).
  std::optional<DumpOutcome> take_outcome();
  // Waits until the capture in hand is written (shutting down).
  std::optional<DumpOutcome> wait_outcome();
  // CPU time the worker thread has used (it runs nothing else).
  double cpu_seconds() const;

 private:
  void loop();

  std::thread thread_;
  clockid_t clock_{};
  bool have_clock_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<DumpJob> job_;
  std::optional<DumpOutcome> outcome_;
  bool busy_ = false, stop_ = false;
};

// The trigger in a capture's file name (steptrace-HOST-YYYYmmddTHHMMSSZ-TRIGGER[-N].cap);
// empty for any other name.
std::string dump_trigger_of(std::string_view file_name);
// Keeps the newest `keep` captures of each trigger in `dir`.
void prune_dumps(const std::string& dir, size_t keep);
// Removes the temporary files of captures a crash cut short (at start-up, before any dump runs).
void remove_stale_dump_temps(const std::string& dir);

}  // namespace steptrace::daemon
