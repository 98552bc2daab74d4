// SPDX-License-Identifier: Apache-2.0
// Launch a job held at a gate: the child is forked, waits on a pipe until the
// tracer has put its pid in the target set, then execs. No event of the job
// is missed and none of the tracer's own is recorded.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace {

class GatedChild {
 public:
  static Result<GatedChild> spawn(const std::vector<std::string>& argv);
  GatedChild(GatedChild&& o) noexcept;
  GatedChild& operator=(GatedChild&&) = delete;
  ~GatedChild();

  pid_t pid() const { return pid_; }
  // Let the child exec. Returns an error when exec failed (e.g. no such command).
  Status release();
  // Non-blocking: true once the child has exited; *status gets the exit code (128+sig if killed).
  bool reap(int* status);
  void kill_and_reap();

 private:
  GatedChild() = default;
  pid_t pid_ = -1;
  int gate_fd_ = -1;  // write end: one byte releases the child
  int err_fd_ = -1;   // read end: errno from a failed exec (CLOEXEC: EOF on success)
  bool reaped_ = false;
};

}  // namespace steptrace
