// SPDX-License-Identifier: Apache-2.0
#include "session/child.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "session/tracer_scheduling.h"

namespace steptrace {

Result<GatedChild> GatedChild::spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  if (argv.empty()) return make_error("no command to run");
  int gate[2], err[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return make_error(fmt::format("pipe: {}", std::strerror(errno)));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(gate[0]);
    ::close(gate[1]);
    return make_error(fmt::format("pipe: {}", std::strerror(errno)));
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return make_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    // Its own process group, as timeout(1) does: a stop signals the group.
    ::setpgid(0, 0);
    ::close(gate[1]);
    ::close(err[0]);
    char c;
    ssize_t n;
    do {
      n = ::read(gate[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);  // the tracer gave up before releasing us
    if (out_fd >= 0 && out_fd != 1) ::dup2(out_fd, 1);
    if (err_fd >= 0 && err_fd != 2) ::dup2(err_fd, 2);
    restore_start_sched();  // the job runs as steptrace was started, not as its SCHED_BATCH tracer
    ::execvp(cargv[0], cargv.data());
    int e = errno;
    (void)!::write(err[1], &e, sizeof(e));
    _exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever runs first, the group exists before release()
  ::close(gate[0]);
  ::close(err[1]);
  GatedChild c;
  c.pid_ = pid;
  c.gate_fd_ = gate[1];
  c.err_fd_ = err[0];
  return c;
}

GatedChild::GatedChild(GatedChild&& o) noexcept
    : pid_(o.pid_),
      gate_fd_(o.gate_fd_),
      err_fd_(o.err_fd_),
      reaped_(o.reaped_),
      released_(o.released_),
      disowned_(o.disowned_),
      wait_status_(o.wait_status_) {
  o.pid_ = -1;
  o.gate_fd_ = o.err_fd_ = -1;
}

GatedChild::~GatedChild() {
  if (gate_fd_ >= 0) ::close(gate_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
  // A held child never ran the job; a released one is stopped by JobControl.
  if (pid_ > 0 && !reaped_ && !disowned_) kill_and_reap();
}

Status GatedChild::release() {
  char c = 1;
  if (::write(gate_fd_, &c, 1) != 1) return make_error(fmt::format("cannot start the job: {}", std::strerror(errno)));
  ::close(gate_fd_);
  gate_fd_ = -1;
  released_ = true;
  int e = 0;
  ssize_t n;
  do {
    n = ::read(err_fd_, &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  ::close(err_fd_);
  err_fd_ = -1;
  if (n == sizeof(e)) return make_error(fmt::format("cannot run the command: {}", std::strerror(e)));
  return Ok{};
}

bool GatedChild::reap(int* status) {
  if (reaped_) return true;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r != pid_) return false;
  reaped_ = true;
  wait_status_ = st;
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

void GatedChild::kill_and_reap() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(pid_, SIGKILL);
  int st;
  ::waitpid(pid_, &st, 0);
  reaped_ = true;
}

}  // namespace steptrace
