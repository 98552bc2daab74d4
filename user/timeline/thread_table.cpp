// SPDX-License-Identifier: Apache-2.0
#include "timeline/thread_table.h"

#include "util/text.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

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
  auto& t = threads_[uint64_t{tid}];
  if (t.tid == 0) {
    t.tid = tid;
    t.pid = pid;
  }
  return t;
}

const ThreadInfo* ThreadTable::find(uint32_t tid) const {
  auto it = threads_.find(uint64_t{tid});
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

void ThreadTable::fold_exited(size_t keep) {
  std::vector<std::pair<uint64_t, uint64_t>> exited;  // (time, key)
  for (const auto& [key, t] : threads_) {
    if (!t.exited) continue;
    uint64_t total = 0;
    for (uint64_t v : t.state_ns) total += v;
    exited.emplace_back(total, key);
  }
  if (exited.size() <= keep) return;
  std::sort(exited.begin(), exited.end(), std::greater<>());
  for (size_t i = keep; i < exited.size(); ++i) {
    auto it = threads_.find(exited[i].second);
    const ThreadInfo& t = it->second;
    for (size_t s = 0; s < static_cast<size_t>(ThreadState::count_); ++s) folded_.state_ns[s] += t.state_ns[s];
    folded_.switches_in += t.switches_in;
    folded_.preempted += t.preempted;
    folded_.yield_switches += t.yield_switches;
    folded_.yields += t.yields;
    folded_.wakeups += t.wakeups;
    ++folded_threads_;
    threads_.erase(it);
  }
}

void ThreadTable::on_event(const Event& ev) {
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, st_sched_switch>) {
          if (e.flags & ST_SWITCH_PREV_TARGET) {
            auto& t = get(e.hdr.pid, e.hdr.tid);
            t.yields += e.prev_yields;
            // Left runnable: a yield gives the CPU away (prev_yields, counted at
            // the switch-out from inside sched_yield), anything else took it,
            // flagged or not (a tick's preemption on the way back to user
            // space carries no preempt flag).
            if (e.prev_state == 0) {
              if (!(e.flags & ST_SWITCH_PREEMPT) && e.prev_yields > 0) ++t.yield_switches;
              else ++t.preempted;
            }
          }
          if (e.flags & ST_SWITCH_NEXT_TARGET) ++get(e.next_pid, e.next_tid).switches_in;
        } else if constexpr (std::is_same_v<T, st_sched_wakeup>) {
          ++get(e.hdr.pid, e.hdr.tid).wakeups;
        } else if constexpr (std::is_same_v<T, st_task_new>) {
          // A new task on the tid of an exited one starts its own entry.
          if (auto it = threads_.find(uint64_t{e.child_tid}); it != threads_.end() && it->second.exited) {
            auto node = threads_.extract(it);
            node.key() = (++retired_ << 32) | e.child_tid;
            threads_.insert(std::move(node));
          }
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
