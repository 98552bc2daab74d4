// SPDX-License-Identifier: Apache-2.0
#include "timeline/thread_table.h"

#include <cstring>

namespace steptrace {

const char* state_name(ThreadState s) {
  switch (s) {
    case ThreadState::running: return "running";
    case ThreadState::runnable: return "runnable";
    case ThreadState::sleeping: return "sleeping";
    case ThreadState::disk_wait: return "disk_wait";
    case ThreadState::dead: return "dead";
    default: return "unknown";
  }
}

std::string utf8_or_question_marks(std::string s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned c = b(0);
    size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (b(k) & 0xc0) == 0x80;
    // No overlong forms, no surrogates, nothing past U+10FFFF (RFC 3629, as nlohmann checks).
    if (ok && n == 3) ok = !(c == 0xe0 && b(1) < 0xa0) && !(c == 0xed && b(1) >= 0xa0);
    if (ok && n == 4) ok = !(c == 0xf0 && b(1) < 0x90) && !(c == 0xf4 && b(1) >= 0x90);
    if (!ok) {
      s[i] = '?';
      n = 1;
    }
    i += n;
  }
  return s;
}

// Thread names are bytes: the kernel cuts them at 15, maybe inside a
// character, and any traced process (or a crafted capture) can set any bytes.
static std::string comm_str(const char* c) { return utf8_or_question_marks(std::string(c, strnlen(c, ST_COMM_LEN))); }

ThreadInfo& ThreadTable::get(uint32_t pid, uint32_t tid) {
  auto& t = threads_[tid];
  if (t.tid == 0) {
    t.tid = tid;
    t.pid = pid;
  }
  return t;
}

const ThreadInfo* ThreadTable::find(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

void ThreadTable::set_comm(uint32_t pid, uint32_t tid, const std::string& comm) {
  auto& t = get(pid, tid);
  if (t.comm.empty()) t.comm = utf8_or_question_marks(comm);
}

void ThreadTable::enter(ThreadInfo& t, ThreadState s, uint64_t ts) {
  if (t.state != ThreadState::unknown && t.state != ThreadState::dead && ts > t.since_ns)
    t.state_ns[static_cast<int>(t.state)] += ts - t.since_ns;
  t.state = s;
  t.since_ns = ts;
  t.woke_from = ThreadState::unknown;
}

void ThreadTable::on_switch(const st_sched_switch& e) {
  const uint64_t ts = e.hdr.ts_ns;
  if (e.flags & ST_SWITCH_PREV_TARGET) {
    auto& t = get(e.hdr.pid, e.hdr.tid);
    t.yields += e.prev_yields;
    if (t.state == ThreadState::running && t.woke_from != ThreadState::unknown) {
      // Wake-up delivery before the enqueue was still the block.
      uint64_t moved = queued_since(t.wait_since_ns, t.since_ns, e.prev_queue_ns) - t.wait_since_ns;
      t.state_ns[static_cast<int>(ThreadState::runnable)] -= moved;
      t.state_ns[static_cast<int>(t.woke_from)] += moved;
    }
    ThreadState next;
    if (e.prev_state == 0) {
      next = ThreadState::runnable;
      if (e.flags & ST_SWITCH_PREEMPT) ++t.preempted;
      else ++t.yield_switches;
    } else if (e.prev_state & 0x2) {  // TASK_UNINTERRUPTIBLE
      next = ThreadState::disk_wait;
    } else {
      next = ThreadState::sleeping;
    }
    enter(t, next, ts);
  }
  if (e.flags & ST_SWITCH_NEXT_TARGET) {
    auto& t = get(e.next_pid, e.next_tid);
    ++t.switches_in;
    bool after_wake = t.state == ThreadState::runnable && t.woke_from != ThreadState::unknown;
    ThreadState from = after_wake ? t.woke_from : ThreadState::unknown;
    uint64_t wait_since = t.since_ns;
    enter(t, ThreadState::running, ts);
    t.woke_from = from;
    t.wait_since_ns = wait_since;
  }
}

void ThreadTable::on_wakeup(const st_sched_wakeup& e) {
  auto& t = get(e.hdr.pid, e.hdr.tid);
  ++t.wakeups;
  if (t.state == ThreadState::sleeping || t.state == ThreadState::disk_wait) {
    auto& w = t.wakers[e.waker_tid];
    w.waker_pid = e.waker_pid;
    if (w.waker_comm.empty()) w.waker_comm = comm_str(e.waker_comm);
    ++w.count;
    w.blocked_ns += e.hdr.ts_ns - t.since_ns;
  } else if (t.state == ThreadState::unknown && (e.flags & ST_WAKE_NEW) == 0) {
    auto& w = t.wakers[e.waker_tid];
    w.waker_pid = e.waker_pid;
    if (w.waker_comm.empty()) w.waker_comm = comm_str(e.waker_comm);
    ++w.count;
  }
  // A wakeup of a running thread (woken before it finished switching out) changes nothing.
  if (t.state != ThreadState::running) {
    ThreadState from = t.state == ThreadState::sleeping || t.state == ThreadState::disk_wait ? t.state : ThreadState::unknown;
    enter(t, ThreadState::runnable, e.hdr.ts_ns);
    t.woke_from = from;
  }
}

void ThreadTable::on_event(const Event& ev) {
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, st_sched_switch>) {
          on_switch(e);
        } else if constexpr (std::is_same_v<T, st_sched_wakeup>) {
          on_wakeup(e);
        } else if constexpr (std::is_same_v<T, st_task_new>) {
          auto& c = get(e.child_pid, e.child_tid);
          c.comm = comm_str(e.comm);
        } else if constexpr (std::is_same_v<T, st_task_comm>) {
          get(e.hdr.pid, e.hdr.tid).comm = comm_str(e.comm);
        } else if constexpr (std::is_same_v<T, st_task_exit>) {
          auto& t = get(e.hdr.pid, e.hdr.tid);
          t.yields += e.yields;
          t.exited = true;
          enter(t, ThreadState::dead, e.hdr.ts_ns);
        }
      },
      ev);
}

void ThreadTable::finish(uint64_t end_ns) {
  for (auto& [tid, t] : threads_) {
    if (t.state != ThreadState::dead && t.state != ThreadState::unknown) {
      ThreadState s = t.state;
      enter(t, s, end_ns);
    }
  }
}

}  // namespace steptrace
