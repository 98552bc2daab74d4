// SPDX-License-Identifier: Apache-2.0
// Deterministic workloads for the [root] tests: a child process held at a
// gate until the tracer is attached, then running a given function.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "cli/options.h"
#include "pipeline/analysis.h"

namespace steptrace::test {

class Workload {
 public:
  explicit Workload(std::function<int()> body);
  ~Workload();
  pid_t pid() const { return pid_; }
  void release();
  // Blocks until the child exits; returns its exit code.
  int wait();
  bool exited();  // non-blocking

 private:
  pid_t pid_ = -1;
  int gate_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

// Options for attaching to one pid with every collector.
Options attach_options(pid_t pid);

// Attach a Session to `w`, release it, poll until it exits, return the report.
SessionReport trace_workload(Workload& w, Options o);

// A directory on a real block device (not tmpfs), for O_DIRECT tests.
std::string disk_tmpdir();

// Fails the test (REQUIRE) unless we are root: [root] tests never pass vacuously.
void require_root();

}  // namespace steptrace::test
