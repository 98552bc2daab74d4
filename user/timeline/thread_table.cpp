// SPDX-License-Identifier: Apache-2.0
#include "timeline/thread_table.h"

#include "util/text.h"

#include <algorithm>
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

// Names from the kernel are the traced process's bytes: made safe here, once (util/text.h).
static std::string comm_str(const char* c) { return host_string(std::string_view(c, strnlen(c, ST_COMM_LEN))); }

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
  if (t.comm.empty()) t.comm = host_string(comm);
}

void ThreadTable::add_time(uint32_t pid, uint32_t tid, ThreadState s, uint64_t ns) {
  get(pid, tid).state_ns[static_cast<int>(s)] += ns;
}

void ThreadTable::move_time(uint32_t pid, uint32_t tid, ThreadState from, ThreadState to, uint64_t ns) {
  auto& t = get(pid, tid);
  auto& f = t.state_ns[static_cast<int>(from)];
  ns = std::min(ns, f);
  f -= ns;
  t.state_ns[static_cast<int>(to)] += ns;
}

void ThreadTable::add_waker(const st_sched_wakeup& e, uint64_t blocked_ns) {
  auto& w = get(e.hdr.pid, e.hdr.tid).wakers[e.waker_tid];
  w.waker_pid = e.waker_pid;
  if (w.waker_comm.empty()) w.waker_comm = comm_str(e.waker_comm);
  ++w.count;
  w.blocked_ns += blocked_ns;
}

void ThreadTable::on_event(const Event& ev) {
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, st_sched_switch>) {
          if (e.flags & ST_SWITCH_PREV_TARGET) {
            auto& t = get(e.hdr.pid, e.hdr.tid);
            t.yields += e.prev_yields;
            if (e.prev_state == 0) {
              if (e.flags & ST_SWITCH_PREEMPT) ++t.preempted;
              else ++t.yield_switches;
            }
          }
          if (e.flags & ST_SWITCH_NEXT_TARGET) ++get(e.next_pid, e.next_tid).switches_in;
        } else if constexpr (std::is_same_v<T, st_sched_wakeup>) {
          ++get(e.hdr.pid, e.hdr.tid).wakeups;
        } else if constexpr (std::is_same_v<T, st_task_new>) {
          auto& c = get(e.child_pid, e.child_tid);
          c.comm = comm_str(e.comm);
        } else if constexpr (std::is_same_v<T, st_task_comm>) {
          get(e.hdr.pid, e.hdr.tid).comm = comm_str(e.comm);
        } else if constexpr (std::is_same_v<T, st_task_exit>) {
          auto& t = get(e.hdr.pid, e.hdr.tid);
          t.yields += e.yields;
          t.exited = true;
        }
      },
      ev);
}

}  // namespace steptrace
