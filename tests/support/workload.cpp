// SPDX-License-Identifier: Apache-2.0
#include "support/workload.h"

#include <catch2/catch.hpp>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "session/session.h"

namespace steptrace::test {

Workload::Workload(std::function<int()> body) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    ::close(p[1]);
    char c;
    if (::read(p[0], &c, 1) != 1) _exit(99);
    ::close(p[0]);
    _exit(body());
  }
  ::close(p[0]);
  gate_ = p[1];
}

Workload::~Workload() {
  if (gate_ >= 0) ::close(gate_);
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void Workload::release() {
  char c = 1;
  REQUIRE(::write(gate_, &c, 1) == 1);
  ::close(gate_);
  gate_ = -1;
}

bool Workload::exited() {
  if (reaped_) return true;
  int st;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return reaped_;
}

int Workload::wait() {
  while (!exited()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return status_;
}

Options attach_options(pid_t pid) {
  Options o;
  o.command = CommandKind::attach;
  o.target.pids = {static_cast<uint32_t>(pid)};
  o.subsystems = *parse_subsystems("all");
  return o;
}

SessionReport trace_workload(Workload& w, Options o) {
  auto s = Session::start(o);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  w.release();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!w.exited() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.drain_ms));
    auto p = (*s)->poll();
    REQUIRE(p.ok());
  }
  REQUIRE(w.exited());
  CHECK(w.wait() == 0);
  auto r = (*s)->finish();
  REQUIRE(r.ok());
  return std::move(*r);
}

std::string disk_tmpdir() {
  for (const char* d : {"/var/tmp", "/tmp", "."}) {
    struct statfs sf {};
    if (::statfs(d, &sf) == 0 && sf.f_type != 0x01021994 /* TMPFS_MAGIC */) return d;
  }
  return ".";
}

void require_root() {
  INFO("[root] tests load BPF programs: run them as root (sudo ctest -L root)");
  REQUIRE(::geteuid() == 0);
}

}  // namespace steptrace::test
