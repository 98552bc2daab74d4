// SPDX-License-Identifier: Apache-2.0
// Hangs: a job whose steps stop ending. Checked about once a second from the
// drain loop. While steps end, the live analysis is probed (its steps found
// on a copy, nothing attributed) at most once per threshold, to learn the
// last step end and the step p99; when no step has ended for max(floor,
// factor x p99), each rank's main thread is looked at in /proc (state,
// syscall and its fd, kernel stack) and in the trace (blocked since, last
// waker, a device execution in flight) to say which ranks wait inside the
// collective and what the others are doing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/analysis.h"
#include "pipeline/hang_report.h"
#include "util/sys_root.h"

namespace steptrace {

struct HangOptions {
  double floor_s = 5;   // never a hang below this (0: hang detection off)
  double factor = 10;   // x the step p99
  size_t min_steps = 3; // steps seen before a stall can be a hang (not start-up, not compilation)
};

class HangWatch {
 public:
  explicit HangWatch(HangOptions o = {}) : opt_(o) {}
  bool enabled() const { return opt_.floor_s > 0; }
  void set_floor(double s) { opt_.floor_s = s; }  // a reloaded configuration
  // A hang found now (reported once), or nothing. Progress after a hang
  // closes it (ended_ns set in done()).
  std::optional<HangReport> check(uint64_t now_ns, Analysis& live, const SysRoot& root);
  // At the end of tracing: an open hang whose steps went on before the end
  // (between the last check and the end) is closed at the first step end after it.
  void close(const JobAnalysis& final_analysis);
  // An analysis made anyway (a daemon's closed window): its steps are progress.
  void observe(const JobAnalysis& ja);
  // Whether check(now) would analyse: callers prepare the analysis (name threads) only then.
  bool probe_due(uint64_t now_ns) const;
  // Every hang found so far, the open one last.
  const std::vector<HangReport>& done() const { return hangs_; }
  bool hung() const { return open_; }
  double threshold_s() const;

 private:
  void probe(uint64_t now_ns, Analysis& live);
  HangReport describe(uint64_t now_ns, const Analysis& live, const SysRoot& root) const;

  HangOptions opt_;
  uint64_t next_check_ns_ = 0, next_probe_ns_ = 0, idle_probe_ns_ = 0;
  uint64_t last_progress_ns_ = 0;
  double p99_s_ = 0;
  size_t steps_seen_ = 0;
  // Every rank the probes found, by pid (a daemon's window can start after a
  // rank stopped sending anything): its number and main thread, the latest seen.
  struct Known {
    int rank = 0;
    uint32_t tid = 0;
  };
  std::map<uint32_t, Known> ranks_;
  std::vector<HangReport> hangs_;
  bool open_ = false;
};

// One main thread, as /proc shows it now (pure parsers for tests).
struct ProcThreadNow {
  char state = '?';
  int64_t syscall = -2;  // -1: running (not in a syscall), -2: unreadable
  uint64_t arg0 = 0;
  std::vector<std::string> stack;
};
ProcThreadNow parse_proc_thread(const std::string& stat, const std::string& syscall, const std::string& stack);
const char* syscall_name_x86(int64_t nr);

}  // namespace steptrace
