// SPDX-License-Identifier: Apache-2.0
// Per-thread state machine: the scheduler events of each target thread
// become time on CPU, runnable (preempted or yielded, waiting for a CPU),
// sleeping (S) and in uninterruptible wait (D), plus who woke it and how
// long it had been blocked each time.
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

// Each byte that does not belong to a well-formed UTF-8 character becomes '?':
// every sink needs valid UTF-8 (nlohmann's dump() throws on anything else).
std::string utf8_or_question_marks(std::string s);

struct WakerEdge {
  uint32_t waker_pid = 0;
  std::string waker_comm;
  uint64_t count = 0;
  uint64_t blocked_ns = 0;  // blocked time that this waker ended
};

struct ThreadInfo {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  ThreadState state = ThreadState::unknown;
  uint64_t since_ns = 0;  // when `state` began
  // The wait before the current slice, for the switch-out that reports its
  // queue time: when it began and, after a wake-up, the block it ended.
  uint64_t wait_since_ns = 0;
  ThreadState woke_from = ThreadState::unknown;
  uint64_t state_ns[static_cast<int>(ThreadState::count_)] = {};
  uint64_t switches_in = 0;
  uint64_t preempted = 0;     // involuntary switch-outs
  uint64_t yield_switches = 0; // voluntary switch-outs while runnable (sched_yield)
  uint64_t yields = 0;        // sched_yield() calls counted in kernel
  uint64_t wakeups = 0;
  std::map<uint32_t, WakerEdge> wakers;  // by waker tid
  bool exited = false;

  uint64_t ns(ThreadState s) const { return state_ns[static_cast<int>(s)]; }
};

class ThreadTable {
 public:
  void on_event(const Event& e);
  // Close every open interval at `end_ns` (end of the window).
  void finish(uint64_t end_ns);

  const std::unordered_map<uint32_t, ThreadInfo>& threads() const { return threads_; }
  const ThreadInfo* find(uint32_t tid) const;
  // Seed a name for a thread seen before any comm event (read from /proc).
  void set_comm(uint32_t pid, uint32_t tid, const std::string& comm);

 private:
  ThreadInfo& get(uint32_t pid, uint32_t tid);
  void enter(ThreadInfo& t, ThreadState s, uint64_t ts);
  void on_switch(const st_sched_switch& e);
  void on_wakeup(const st_sched_wakeup& e);

  std::unordered_map<uint32_t, ThreadInfo> threads_;
};

}  // namespace steptrace
