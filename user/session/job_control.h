// SPDX-License-Identifier: Apache-2.0
// The launched job's lifecycle, as timeout(1) keeps it: the job runs in its
// own process group; a stop (a signal to steptrace, SIGTERM at the end of -d
// or on q in top) goes to that group, as a terminal's Ctrl-C would; once the
// launcher has exited, what is left of its tree gets SIGTERM; tracing goes on
// while the job shuts down (checkpoints, closes its devices), and whatever is
// still alive after the grace period (--kill-after) gets SIGKILL. Or, with
// --keep-running, tracing ends and the job is left alone. steptrace exits
// with the job's status.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "session/child.h"
#include "util/sys_root.h"

namespace steptrace {

struct JobControlSettings {
  uint64_t kill_after_ns = 10'000'000'000ull;  // --kill-after: SIGTERM -> SIGKILL grace
  bool keep_running = false;                   // --keep-running: a stop ends tracing, not the job
  // steptrace is the child subreaper (prctl, set by the CLI): the job's
  // orphans stay in its tree, so they are signalled and reaped too.
  bool subreaper = false;
};

class JobControl {
 public:
  JobControl(GatedChild child, JobControlSettings s, SysRoot root);

  pid_t pid() const { return child_.pid(); }
  // Ask the job to stop with `sig` (the signal steptrace got, or SIGTERM).
  // Forwarded to every process of the job's tree; the first request starts
  // the grace period. With keep_running nothing is sent.
  void request_stop(int sig, uint64_t now_ns);
  bool stop_requested() const { return stop_requested_; }
  // Reap what exited, SIGKILL the tree once the grace period is over. True
  // when tracing should end: the job exited on its own, or a stop was asked
  // and the tree is gone (or, with keep_running, at once).
  bool advance(uint64_t now_ns);
  // The job's exit status (128 + signal when killed); nullopt while it runs.
  std::optional<int> exit_status() const { return status_; }
  // How the job ended, for the report ("exited 0", "killed by SIGKILL after 10 s", ...).
  std::string outcome() const;
  // "" until a stop was asked; then what is awaited ("stopping the job:
  // SIGTERM sent, SIGKILL in 8 s"), for the live view.
  std::string stop_status(uint64_t now_ns) const;
  // Leave the job running: the destructor no longer stops it.
  void detach() { detached_ = true; }
  ~JobControl();
  JobControl(JobControl&&) = default;
  JobControl& operator=(JobControl&&) = delete;

 private:
  struct Member {
    pid_t pid;
    pid_t pgrp;
  };
  // Live processes of the job: the direct child, its descendants, and (as
  // subreaper) its orphans with theirs. Zombies are not members.
  std::vector<Member> tree() const;
  bool tree_alive() const;
  bool check(uint64_t now_ns);
  void reap_child();
  void reap_orphans();

  GatedChild child_;
  JobControlSettings s_;
  SysRoot root_;
  bool stop_requested_ = false;
  bool killed_ = false;
  bool detached_ = false;
  bool over_ = false;  // advance() said so once: it stays so
  bool group_termed_ = false;
  int stop_signal_ = 0;        // the first stop's signal  // the group got SIGTERM from request_stop
  std::set<pid_t> termed_;     // processes sent SIGTERM one by one
  uint64_t kill_deadline_ns_ = 0;
  uint64_t killed_at_ns_ = 0;
  uint64_t next_check_ns_ = 0;
  std::optional<int> status_;
};

// "SIGTERM" for SIGTERM; "signal 64" for what has no name.
std::string signal_name(int sig);

}  // namespace steptrace
