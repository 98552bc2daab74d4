// SPDX-License-Identifier: Apache-2.0
// Launch a job held at a gate: the child is forked into a process group of
// its own (so a stop reaches its whole tree: session/job_control.h), waits on
// a pipe until the tracer has put its pid in the target set, then execs. No
// event of the job is missed and none of the tracer's own is recorded.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace {

class GatedChild {
 public:
  // out_fd / err_fd >= 0 become the job's stdout / stderr (a file, or
  // steptrace's stderr when its stdout carries JSON); -1 leaves ours.
  static Result<GatedChild> spawn(const std::vector<std::string>& argv, int out_fd = -1, int err_fd = -1);
  GatedChild(GatedChild&& o) noexcept;
  GatedChild(const GatedChild&) = delete;
  GatedChild& operator=(GatedChild&&) = delete;
  ~GatedChild();

  pid_t pid() const { return pid_; }
  // Let the child exec. Returns an error when exec failed (e.g. no such command).
  Status release();
  bool released() const { return released_; }
  // Non-blocking: true once the child has exited; *status gets the exit code (128+sig if killed).
  bool reap(int* status);
  // The raw wait status once reaped (WIFSIGNALED tells an exit code >= 128 from a signal).
  int wait_status() const { return wait_status_; }
  // Kill a child that was never released (it only waits at the gate).
  void kill_and_reap();
  // The child is someone else's concern now: the destructor leaves it alone.
  void disown() { disowned_ = true; }

 private:
  GatedChild() = default;
  pid_t pid_ = -1;
  int gate_fd_ = -1;  // write end: one byte releases the child
  int err_fd_ = -1;   // read end: errno from a failed exec (CLOEXEC: EOF on success)
  bool reaped_ = false;
  bool released_ = false;
  bool disowned_ = false;
  int wait_status_ = 0;
};

}  // namespace steptrace
