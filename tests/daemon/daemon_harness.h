// SPDX-License-Identifier: Apache-2.0
// Runs `steptrace daemon` (the real binary) and other helper processes for
// the daemon tests, and reads its /metrics.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace steptrace::test {

// A free TCP port on 127.0.0.1 (bound and released).
int free_port();
std::string make_tmpdir(const std::string& tag);

// A child process running argv with stdout+stderr appended to `log_path`.
class Proc {
 public:
  Proc() = default;
  Proc(const std::vector<std::string>& argv, const std::string& log_path);
  ~Proc();
  Proc(Proc&& o) noexcept;
  Proc& operator=(Proc&& o) noexcept;
  pid_t pid() const { return pid_; }
  bool running();
  // SIGTERM, wait up to `timeout_s`, then SIGKILL. Returns the exit status (128+sig if killed).
  int stop(double timeout_s = 10);
  // Waits for exit up to timeout; -1 on timeout.
  int wait(double timeout_s);

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

struct HttpResult {
  int status = 0;
  std::string body;
};
HttpResult http_get(int port, const std::string& path, double timeout_s = 5);
HttpResult http_post(int port, const std::string& path, const std::string& body = "", double timeout_s = 30);

// Value of the first sample of `name` whose label text contains every `needles` entry.
std::optional<double> metric_value(const std::string& text, const std::string& name,
                                   const std::vector<std::string>& needles = {});

// What Prometheus's own parser lets through but the exposition must not
// have: a family whose samples are not all together after its # TYPE line
// (the text format wants one group per family), a second # TYPE for a family,
// a `job` label (Prometheus's target label: it would become exported_job),
// a `pid` label outside steptrace_rank_info (a new series at every restart).
// One line per problem; empty when there is none.
std::vector<std::string> exposition_problems(const std::string& text);

// utime+stime of a process in seconds, and its RSS in bytes, from /proc.
double proc_cpu_s(pid_t pid);
uint64_t proc_rss(pid_t pid);
std::string read_file(const std::string& path);

}  // namespace steptrace::test
