// SPDX-License-Identifier: Apache-2.0
#include "session/hang_watch.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "decode/syscalls.h"
#include "steps/span_classes.h"
#include "util/text.h"

namespace steptrace {

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

std::string read_text(const std::string& path) {
  auto t = read_small_file(path, 16384);
  return t ? *t : std::string();
}

bool has_fd_arg(int64_t nr) {
  switch (nr) {
    case 0: case 1: case 16: case 17: case 18: case 19: case 20: case 44: case 45: case 46: case 47: return true;
    default: return false;
  }
}

std::string fd_target(const SysRoot& root, uint32_t pid, uint64_t fd) {
  char buf[256];
  const std::string link = root.proc() + "/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

ProcThreadNow read_thread(const SysRoot& root, uint32_t pid, uint32_t tid) {
  const std::string base = root.proc() + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
  return parse_proc_thread(read_text(base + "stat"), read_text(base + "syscall"), read_text(base + "stack"));
}

// A thread of the process blocked on a socket: the host collective's wait (a
// main thread that hands its all-reduce to a worker waits on the worker).
std::optional<std::pair<uint32_t, std::string>> socket_wait(const SysRoot& root, uint32_t pid) {
  for (uint32_t tid : root.threads_of(pid)) {
    auto t = read_thread(root, pid, tid);
    if (t.state == 'R' || !has_fd_arg(t.syscall)) continue;
    auto target = fd_target(root, pid, t.arg0);
    if (target.rfind("socket:", 0) == 0) return std::pair{tid, std::string(syscall_name_x86(t.syscall))};
  }
  return std::nullopt;
}

// The main thread kicked a device execution that has not been acknowledged.
std::optional<uint64_t> execution_in_flight(const ThreadTimeline* t) {
  if (!t) return std::nullopt;
  uint64_t kick = 0, ack = 0;
  for (const auto& s : t->spans) {
    if (steps::is_kick(s)) kick = std::max(kick, s.end);
    if (steps::is_ack(s) || s.kind == SpanKind::nrt_execute) ack = std::max(ack, s.end);
  }
  if (kick > ack) return kick;
  return std::nullopt;
}

std::string doing_text(const HangRank& h) {
  if (h.state == 'D') return fmt::format("in uninterruptible sleep (D) in {}", h.syscall_name.empty() ? "the kernel" : h.syscall_name);
  if (h.state == 'Z' || h.state == 'X') return "exited";
  switch (h.syscall) {
    case 35: case 230: return "asleep in " + h.syscall_name;
    case 202: return "waiting on a lock or another thread (futex)";
    case -1: return "running on a CPU, in no system call";
    default: break;
  }
  if (h.fd_target.rfind("pipe:", 0) == 0) return "waiting on a pipe in " + h.syscall_name + " (its data loader?)";
  if (h.syscall >= 0) return "blocked in " + h.syscall_name;
  return "state unknown";
}

}  // namespace

const char* syscall_name_x86(int64_t nr) {
  switch (nr) {
    case 0: return "read";
    case 1: return "write";
    case 7: return "poll";
    case 16: return "ioctl";
    case 17: return "pread64";
    case 19: return "readv";
    case 23: return "select";
    case 24: return "sched_yield";
    case 35: return "nanosleep";
    case 44: return "sendto";
    case 45: return "recvfrom";
    case 46: return "sendmsg";
    case 47: return "recvmsg";
    case 61: return "wait4";
    case 202: return "futex";
    case 230: return "clock_nanosleep";
    case 232: return "epoll_wait";
    case 270: return "pselect6";
    case 271: return "ppoll";
    case 281: return "epoll_pwait";
    case 441: return "epoll_pwait2";
    default: return "syscall";
  }
}

ProcThreadNow parse_proc_thread(const std::string& stat, const std::string& syscall, const std::string& stack) {
  ProcThreadNow t;
  if (auto st = parse_proc_stat(stat)) t.state = st->state;
  std::istringstream in(syscall);
  std::string first;
  if (in >> first) {
    if (first == "running") t.syscall = -1;
    else {
      char* end = nullptr;
      long long nr = std::strtoll(first.c_str(), &end, 10);
      if (end && *end == '\0') t.syscall = nr;
      std::string a0;
      if (in >> a0) t.arg0 = std::strtoull(a0.c_str(), nullptr, 16);
    }
  }
  std::istringstream lines(stack);
  for (std::string line; std::getline(lines, line);) {
    // "[<0>] hrtimer_nanosleep+0x9a/0x140": the function name only
    auto b = line.find("] ");
    if (b == std::string::npos) continue;
    std::string fn = line.substr(b + 2);
    if (auto plus = fn.find('+'); plus != std::string::npos) fn.resize(plus);
    if (!fn.empty()) t.stack.push_back(fn);
  }
  return t;
}

double HangWatch::threshold_s() const { return std::max(opt_.floor_s, opt_.factor * p99_s_); }

void HangWatch::probe(uint64_t now_ns, Analysis& live) {
  observe(live.peek_steps(now_ns));
}

void HangWatch::observe(const JobAnalysis& ja) {
  std::vector<double> d;
  uint64_t last_end = 0;
  size_t steps = 0;
  for (const auto& r : ja.ranks) {
    steps = std::max<size_t>(steps, r.steps_total);
    ranks_[r.pid] = {r.rank, r.main_tid};
    for (const auto& s : r.steps) {
      last_end = std::max(last_end, s.end_ns);
      if (s.index >= ja.skipped_warmup_steps) d.push_back(static_cast<double>(s.duration()) / 1e9);
    }
  }
  // A daemon's windows start empty: what earlier windows showed still counts.
  steps_seen_ = std::max(steps_seen_, steps);
  if (last_end > last_progress_ns_) last_progress_ns_ = last_end;
  if (!d.empty()) {
    auto idx = std::min(d.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(d.size()))) - 1);
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(idx), d.end());
    p99_s_ = d[idx];
  }
}

HangReport HangWatch::describe(uint64_t now_ns, const Analysis& live, const SysRoot& root) const {
  HangReport h;
  h.since_ns = last_progress_ns_;
  h.detected_ns = now_ns;
  h.threshold_s = threshold_s();
  h.step_p99_s = p99_s_;
  for (const auto& [pid, known] : ranks_) {
    HangRank x;
    x.rank = known.rank;
    x.pid = pid;
    x.tid = known.tid;
    auto now = read_thread(root, pid, known.tid);
    if (now.state == '?' || now.state == 'Z' || now.state == 'X') continue;  // gone: not part of the hang
    x.state = now.state;
    x.syscall = now.syscall;
    x.syscall_name = now.syscall >= 0 ? syscall_name_x86(now.syscall) : "";
    if (has_fd_arg(now.syscall)) x.fd_target = fd_target(root, pid, now.arg0);
    x.kernel_stack = now.stack;
    const ThreadTimeline* t = live.timeline.find(known.tid);
    if (t && (t->cur == ThreadState::sleeping || t->cur == ThreadState::disk_wait) && t->cur_since && t->cur_since < now_ns)
      x.blocked_s = static_cast<double>(now_ns - t->cur_since) / 1e9;
    if (t)
      for (auto it = t->segs.rbegin(); it != t->segs.rend(); ++it)
        if (it->waker_tid) {
          // A timer's wake-up is charged to whoever ran on that CPU: only a traced waker is named.
          const ThreadInfo* w = live.threads.find(it->waker_tid);
          if (w && !w->comm.empty() && it->waker_sys >= 0) {
            x.last_waker_tid = it->waker_tid;
            x.last_waker_comm = w->comm;
          }
          break;
        }
    if (auto kick = execution_in_flight(t); kick && x.state != 'D') {
      x.in_collective = true;
      x.doing = fmt::format("waiting for its device execution (submitted {:.1f} s ago; it holds the device collective)",
                            static_cast<double>(now_ns - std::min(now_ns, *kick)) / 1e9);
    } else if (auto sock = socket_wait(root, pid); sock && x.state != 'D') {
      x.in_collective = true;
      x.doing = fmt::format("waiting on the network ({} on a socket, tid {})", sock->second, sock->first);
    } else {
      x.doing = doing_text(x);
    }
    h.ranks.push_back(std::move(x));
  }
  return h;
}

void HangWatch::close(const JobAnalysis& ja) {
  if (!open_) return;
  uint64_t first = 0;
  for (const auto& r : ja.ranks)
    for (const auto& st : r.steps)
      if (st.end_ns > hangs_.back().detected_ns && (!first || st.end_ns < first)) first = st.end_ns;
  if (!first) return;
  hangs_.back().ended_ns = first;
  open_ = false;
}

bool HangWatch::probe_due(uint64_t now_ns) const {
  if (!enabled() || now_ns < next_check_ns_) return false;
  const uint64_t threshold = static_cast<uint64_t>(threshold_s() * 1e9);
  // (A step end past now_ns, from a window closed a moment later, is progress.)
  const bool stalled = last_progress_ns_ == 0 || (now_ns > last_progress_ns_ && now_ns - last_progress_ns_ > threshold);
  return open_ || (stalled && now_ns >= next_probe_ns_);
}

std::optional<HangReport> HangWatch::check(uint64_t now_ns, Analysis& live, const SysRoot& root) {
  if (!probe_due(now_ns)) return std::nullopt;
  next_check_ns_ = now_ns + kSecond;
  const uint64_t threshold = static_cast<uint64_t>(threshold_s() * 1e9);
  const uint64_t before = last_progress_ns_;
  probe(now_ns, live);
  // Before the steps begin (start-up, compilation: minutes) and once every
  // rank is gone, a probe every half threshold; while stalled, every second.
  // Each probe without steps waits twice as long as the last, up to a minute
  // (`attach --all` on a host with no training job must not analyse its
  // whole window every few seconds).
  const bool started = steps_seen_ >= opt_.min_steps && !ranks_.empty();
  idle_probe_ns_ = started ? 0 : std::min<uint64_t>(60 * kSecond, std::max<uint64_t>(threshold / 2, 2 * idle_probe_ns_));
  next_probe_ns_ = now_ns + (started ? kSecond : std::max<uint64_t>(kSecond, idle_probe_ns_));
  if (open_) {
    if (last_progress_ns_ > before) {
      hangs_.back().ended_ns = now_ns;
      open_ = false;
    }
    return std::nullopt;
  }
  if (steps_seen_ < opt_.min_steps || last_progress_ns_ == 0) return std::nullopt;
  if (now_ns <= last_progress_ns_ || now_ns - last_progress_ns_ <= static_cast<uint64_t>(threshold_s() * 1e9))
    return std::nullopt;
  HangReport h = describe(now_ns, live, root);
  if (h.ranks.empty()) {  // every rank is gone: the job ended, it did not hang
    ranks_.clear();
    return std::nullopt;
  }
  hangs_.push_back(std::move(h));
  open_ = true;
  return hangs_.back();
}

}  // namespace steptrace
