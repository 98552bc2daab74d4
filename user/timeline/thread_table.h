// SPDX-License-Identifier: Apache-2.0
// Per-thread totals: time on CPU, runnable (preempted or yielded, waiting for
// a CPU), sleeping (S) and in uninterruptible wait (D), plus who woke it and
// how long it had been blocked each time. The states come from TimelineStore
// (timeline_store.h), the one scheduler state machine.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "decode/event.h"

namespace steptrace {

enum class ThreadState : uint8_t { unknown = 0, running, runnable, sleeping, disk_wait, dead, count_ };
const char* state_name(ThreadState s);

// Where the wait before a slice that began at slice_start really started:
// a switch-out record carries the queue wait of its slice (schedstat
// run_delay), so the thread reached a runqueue at slice_start - queue_ns. The
// time between the wake-up and that is the wake-up travelling to an idle or
// remote CPU: it belongs to the block that ended, not to CPU contention.
// Without a known queue wait: the wake-up itself.
inline uint64_t queued_since(uint64_t woken_at, uint64_t slice_start, uint64_t queue_ns) {
  if (queue_ns == ST_QUEUE_UNKNOWN || queue_ns >= slice_start || slice_start - queue_ns <= woken_at) return woken_at;
  return slice_start - queue_ns;
}

struct WakerEdge {
  uint32_t waker_pid = 0;
  std::string waker_comm;
  uint64_t count = 0;
  uint64_t blocked_ns = 0;  // blocked time that this waker ended
};

struct ThreadInfo {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  uint64_t state_ns[static_cast<int>(ThreadState::count_)] = {};
  uint64_t switches_in = 0;
  uint64_t preempted = 0;      // switch-outs that left it runnable and were not its own yield
  uint64_t yield_switches = 0; // switch-outs from inside sched_yield() that gave the CPU away
  uint64_t yields = 0;        // sched_yield() calls counted in kernel
  uint64_t wakeups = 0;
  std::map<uint32_t, WakerEdge> wakers;  // by waker tid
  bool exited = false;

  uint64_t ns(ThreadState s) const { return state_ns[static_cast<int>(s)]; }
};

// Per-thread totals. There is one scheduler state machine, TimelineStore's:
// the per-state times and the blocked time each waker ended are derived from
// the segments it closes (add_time, move_time, add_waker, called by it); the
// table itself counts what needs no state (switches, yields, wake-ups, names,
// exits) from the events.
class ThreadTable {
 public:
  void on_event(const Event& e);

  // Keyed like TimelineStore's: the live thread of a tid under the tid, an
  // exited thread whose tid was reused under a retired key.
  const std::unordered_map<uint64_t, ThreadInfo>& threads() const { return threads_; }
  const ThreadInfo* find(uint32_t tid) const;  // the live thread of that tid
  // Seed a name for a thread seen before any comm event (read from /proc).
  void set_comm(uint32_t pid, uint32_t tid, const std::string& comm);

  // From the state machine: a closed segment of `ns` in state `s`.
  void add_time(uint32_t pid, uint32_t tid, ThreadState s, uint64_t ns);
  // A closed segment's time that turned out to belong to another state (the
  // wake-up's trip to a CPU is part of the block, not of the queue wait).
  void move_time(uint32_t pid, uint32_t tid, ThreadState from, ThreadState to, uint64_t ns);
  // A wake-up that ended a block of `blocked_ns` (0: the thread's state was
  // not known yet).
  void add_waker(const st_sched_wakeup& e, uint64_t blocked_ns);

  // A long session on a host that forks all day: keep at most `keep` exited
  // threads, those with the most time; the rest are summed into folded()
  // (the report says how many) so the table stays bounded.
  void fold_exited(size_t keep);
  const ThreadInfo& folded() const { return folded_; }
  uint64_t folded_threads() const { return folded_threads_; }

 private:
  ThreadInfo& get(uint32_t pid, uint32_t tid);

  std::unordered_map<uint64_t, ThreadInfo> threads_;
  uint64_t retired_ = 0;  // threads whose tid was reused
  ThreadInfo folded_;
  uint64_t folded_threads_ = 0;
};

}  // namespace steptrace
