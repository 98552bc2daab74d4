// SPDX-License-Identifier: Apache-2.0
// A training job that stopped making progress: which ranks are inside the
// step's collective (waiting for the others) and which are not, and what
// the missing ones are doing. Found live (session/hang_watch.h, the daemon);
// carried in the report, its JSON and the daemon's log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace steptrace {

struct HangRank {
  int rank = 0;
  uint32_t pid = 0, tid = 0;    // the rank's main thread
  bool in_collective = false;   // waiting for the other ranks (device execution, network wait)
  std::string doing;            // "waiting for its device execution (queued at ...)", "asleep in clock_nanosleep"
  char state = '?';             // /proc state letter of the main thread (R, S, D, ...)
  int64_t syscall = -2;         // the syscall it is in; -1 none (running user code or preempted); -2 unknown
  std::string syscall_name;
  std::string fd_target;        // the syscall's fd, when it has one: "socket:[123]", "pipe:[45]", a path
  double blocked_s = 0;         // how long it has been blocked, from the trace (0: running or unknown)
  std::vector<std::string> kernel_stack;  // innermost first, from /proc/PID/task/TID/stack (empty: unreadable)
  uint32_t last_waker_tid = 0;  // who last woke the main thread
  std::string last_waker_comm;
};

struct HangReport {
  uint64_t since_ns = 0;       // the last step end any rank reached (CLOCK_MONOTONIC)
  uint64_t detected_ns = 0;
  uint64_t ended_ns = 0;       // a step ended again (0: still hung when tracing ended)
  double threshold_s = 0;      // how long without progress counts as a hang
  double step_p99_s = 0;
  std::vector<HangRank> ranks;
  std::vector<int> missing() const;  // ranks not in the collective
  std::string headline() const;      // one sentence
  std::vector<std::string> lines() const;  // one per rank
};

nlohmann::json hang_json(const HangReport& h);

}  // namespace steptrace
