// SPDX-License-Identifier: Apache-2.0
#include "session/job_control.h"

#include <fmt/core.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "util/log.h"

namespace steptrace {

namespace {
// While stopping, the tree is looked for in /proc this often (a full /proc
// scan: cheap, but not for every 10 ms drain tick on a host with 10^4 pids).
constexpr uint64_t kTreeCheckNs = 50'000'000;
// After SIGKILL, a process in D state may take a while; tracing ends anyway.
constexpr uint64_t kAfterKillNs = 2'000'000'000;
}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return fmt::format("signal {}", sig);
}

JobControl::JobControl(GatedChild child, JobControlSettings s, SysRoot root)
    : child_(std::move(child)), s_(s), root_(std::move(root)) {}

JobControl::~JobControl() {
  if (child_.pid() <= 0 || status_ || over_) return;
  if (!child_.released()) return;  // never ran: GatedChild kills the held fork
  child_.disown();
  if (detached_ || s_.keep_running) return;
  // Error paths only (finish() ends the job properly): the same ladder, blocking.
  if (!stop_requested_) request_stop(SIGTERM, 0);
  uint64_t t = 0;
  while (!advance(t)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t += 20'000'000;
  }
}

std::vector<JobControl::Member> JobControl::tree() const {
  auto procs = root_.processes();
  std::map<uint32_t, uint32_t> parent_of;
  for (const auto& [pid, ps] : procs) parent_of[pid] = ps.ppid;
  std::vector<uint32_t> roots;
  if (!status_) roots.push_back(static_cast<uint32_t>(child_.pid()));
  if (s_.subreaper) {
    // The job's orphans were reparented to us (the CLI starts no other children).
    const auto self = static_cast<uint32_t>(::getpid());
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == self && static_cast<pid_t>(pid) != child_.pid()) roots.push_back(pid);
  }
  std::vector<Member> out;
  auto add = [&](uint32_t p) {
    auto it = procs.find(p);
    if (it != procs.end() && it->second.state != 'Z' && it->second.state != 'X')
      out.push_back({static_cast<pid_t>(p), static_cast<pid_t>(it->second.pgrp)});
  };
  for (uint32_t p : roots) add(p);
  for (uint32_t p : descendants_in(parent_of, roots)) add(p);
  return out;
}

bool JobControl::tree_alive() const {
  if (!status_) return true;
  return !tree().empty() || ::kill(-child_.pid(), 0) == 0;
}

void JobControl::reap_child() {
  int st = 0;
  if (!status_ && child_.reap(&st)) status_ = st;
}

void JobControl::reap_orphans() {
  if (!s_.subreaper) return;
  // Only the job's own orphans: zombies whose parent is now steptrace.
  const auto self = static_cast<uint32_t>(::getpid());
  for (const auto& [pid, ps] : root_.processes())
    if (ps.ppid == self && ps.state == 'Z' && static_cast<pid_t>(pid) != child_.pid())
      ::waitpid(static_cast<pid_t>(pid), nullptr, WNOHANG);
}

void JobControl::request_stop(int sig, uint64_t now_ns) {
  if (s_.keep_running) {
    stop_requested_ = true;
    return;
  }
  if (!stop_requested_) {
    stop_requested_ = true;
    stop_signal_ = sig;
    kill_deadline_ns_ = now_ns + s_.kill_after_ns;
    log::info("stopping the job: {} to its process group, SIGKILL after {:.1f} s", signal_name(sig),
              static_cast<double>(s_.kill_after_ns) / 1e9);
  }
  if (killed_) return;
  // What a terminal's Ctrl-C does for a foreground job: the whole group.
  // The launcher stays in charge of processes it moved out of the group
  // (torchrun starts each worker in its own session); see check().
  ::kill(-child_.pid(), sig);
  if (sig == SIGTERM) group_termed_ = true;
  next_check_ns_ = 0;
}

bool JobControl::advance(uint64_t now_ns) {
  if (over_) return true;
  over_ = check(now_ns);
  return over_;
}

bool JobControl::check(uint64_t now_ns) {
  reap_child();
  if (!stop_requested_) return status_.has_value();  // the job ended on its own
  if (s_.keep_running) return true;
  if (now_ns < next_check_ns_) return false;
  next_check_ns_ = now_ns + kTreeCheckNs;
  reap_orphans();
  if (!tree_alive()) return true;
  if (!killed_ && now_ns >= kill_deadline_ns_) {
    log::warn("the job did not stop within {:.1f} s of the request: SIGKILL to its process tree",
              static_cast<double>(s_.kill_after_ns) / 1e9);
    ::kill(-child_.pid(), SIGKILL);
    for (const auto& m : tree()) ::kill(m.pid, SIGKILL);
    killed_ = true;
    killed_at_ns_ = now_ns;
    return false;
  }
  if (!killed_ && status_) {
    // The launcher is gone and part of its tree is not (it ignored the
    // signal, as a shell's background jobs ignore SIGINT, or it left the
    // group): nobody else will stop it, so SIGTERM each, once.
    const pid_t group = child_.pid();
    for (const auto& m : tree()) {
      if (m.pgrp == group && group_termed_) continue;
      if (termed_.insert(m.pid).second) ::kill(m.pid, SIGTERM);
    }
  }
  if (killed_ && now_ns - killed_at_ns_ >= kAfterKillNs) {
    log::warn("processes of the job are still alive {:.0f} s after SIGKILL (uninterruptible sleep?)",
              static_cast<double>(kAfterKillNs) / 1e9);
    return true;
  }
  return false;
}

std::string JobControl::stop_status(uint64_t now_ns) const {
  if (!stop_requested_) return "";
  if (s_.keep_running) return "tracing stopped; the job keeps running";
  if (killed_) return "stopping the job: SIGKILL sent";
  const double left = now_ns < kill_deadline_ns_ ? static_cast<double>(kill_deadline_ns_ - now_ns) / 1e9 : 0;
  return fmt::format("stopping the job: {} sent, SIGKILL in {:.0f} s", signal_name(stop_signal_), left);
}

std::string JobControl::outcome() const {
  if (!status_) return s_.keep_running && stop_requested_ ? "left running (--keep-running)" : "running";
  const int ws = child_.wait_status();
  std::string o = WIFSIGNALED(ws) ? "killed by " + signal_name(WTERMSIG(ws)) : fmt::format("exited {}", *status_);
  if (killed_)
    o += fmt::format(" (SIGKILL after the {:.1f} s grace period)", static_cast<double>(s_.kill_after_ns) / 1e9);
  else if (stop_requested_)
    o += " (after the stop request)";
  return o;
}

}  // namespace steptrace
