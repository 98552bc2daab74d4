// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cstring>

#include <nlohmann/json.hpp>

#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"

using namespace steptrace;

namespace {
constexpr uint32_t kPid = 100;

// The thread table's totals come from the one state machine (TimelineStore):
// the events go through both, as in the pipeline.
struct Tables {
  TimelineStore tl;
  ThreadTable tt;
  void on_event(const Event& e) {
    tt.on_event(e);
    tl.on_event(e, &tt);
  }
  void finish(uint64_t end_ns) { tl.finish(end_ns, &tt); }
  const ThreadInfo* find(uint32_t tid) const { return tt.find(tid); }
  const std::unordered_map<uint64_t, ThreadInfo>& threads() const { return tt.threads(); }
  void set_comm(uint32_t pid, uint32_t tid, const std::string& comm) { tt.set_comm(pid, tid, comm); }
};

Event sw(uint64_t ts, uint32_t prev, uint32_t next, uint32_t prev_state, bool preempt, uint32_t yields = 0,
         uint64_t prev_queue_ns = ST_QUEUE_UNKNOWN) {
  st_sched_switch e{};
  e.hdr.size = sizeof(e);
  e.hdr.kind = ST_EV_SCHED_SWITCH;
  e.hdr.ts_ns = ts;
  e.hdr.pid = prev ? kPid : 0;
  e.hdr.tid = prev;
  e.next_pid = next ? kPid : 0;
  e.next_tid = next;
  e.prev_state = prev_state;
  e.flags = (preempt ? ST_SWITCH_PREEMPT : 0) | (prev ? ST_SWITCH_PREV_TARGET : 0) |
            (next ? ST_SWITCH_NEXT_TARGET : 0);
  e.prev_yields = yields;
  e.prev_queue_ns = prev_queue_ns;
  return Event{e};
}

Event wake(uint64_t ts, uint32_t wakee, uint32_t waker, const char* comm) {
  st_sched_wakeup e{};
  e.hdr.size = sizeof(e);
  e.hdr.kind = ST_EV_SCHED_WAKEUP;
  e.hdr.ts_ns = ts;
  e.hdr.pid = kPid;
  e.hdr.tid = wakee;
  e.waker_pid = kPid;
  e.waker_tid = waker;
  std::strncpy(e.waker_comm, comm, sizeof(e.waker_comm) - 1);
  return Event{e};
}
}  // namespace

// Left runnable with no preempt flag: its own yield when the switch-out came
// from inside sched_yield(), else a preemption (a tick's, on the way back to
// user space, carries no flag).
TEST_CASE("thread table: a switch-out that leaves a thread runnable is a yield only from sched_yield", "[timeline]") {
  Tables t;
  t.on_event(sw(1000, 0, 1, 0, false));
  t.on_event(sw(1500, 1, 0, 0, false, 1));  // yielded
  t.on_event(sw(1600, 0, 1, 0, false));
  t.on_event(sw(1900, 1, 0, 0, false, 0));  // taken at the return to user space
  t.on_event(sw(2000, 0, 1, 0, false));
  t.on_event(sw(2100, 1, 0, 0, true, 0));   // preempted in the kernel
  t.on_event(sw(2200, 0, 1, 0, false));
  t.on_event(sw(2300, 1, 0, 1, false, 0));  // went to sleep: neither
  t.finish(3000);
  const ThreadInfo* i = t.find(1);
  REQUIRE(i != nullptr);
  CHECK(i->yield_switches == 1);
  CHECK(i->yields == 1);
  CHECK(i->preempted == 2);
  CHECK(i->switches_in == 4);
}

TEST_CASE("thread table: on-CPU, sleeping, runnable and preempted time add up", "[timeline]") {
  Tables t;
  t.on_event(sw(1000, 0, 1, 0, false));       // tid 1 runs at 1000
  t.on_event(sw(3000, 1, 0, 1, false));       // sleeps (S) at 3000
  t.on_event(wake(8000, 1, 2, "loader"));     // woken by tid 2 at 8000
  t.on_event(sw(8500, 0, 1, 0, false));       // runs at 8500
  t.on_event(sw(9000, 1, 0, 0, true, 7));     // preempted at 9000, 7 yields in that slice
  t.on_event(sw(9400, 0, 1, 0, false));       // runs again
  t.on_event(sw(9600, 1, 0, 2, false));       // D state (disk)
  t.finish(10000);
  const ThreadInfo* i = t.find(1);
  REQUIRE(i != nullptr);
  CHECK(i->ns(ThreadState::running) == 2000 + 500 + 200);
  CHECK(i->ns(ThreadState::sleeping) == 5000);
  CHECK(i->ns(ThreadState::runnable) == 500 + 400);
  CHECK(i->ns(ThreadState::disk_wait) == 400);
  CHECK(i->preempted == 1);
  CHECK(i->yields == 7);
  CHECK(i->switches_in == 3);
  REQUIRE(i->wakers.count(2) == 1);
  CHECK(i->wakers.at(2).count == 1);
  CHECK(i->wakers.at(2).blocked_ns == 5000);
  CHECK(i->wakers.at(2).waker_comm == "loader");
}

TEST_CASE("thread table: a wake-up's trip to the CPU stays part of the block, only the queue wait is runnable",
          "[timeline]") {
  Tables t;
  t.on_event(sw(1000, 0, 1, 0, false));                         // runs
  t.on_event(sw(3000, 1, 0, 1, false));                         // sleeps
  t.on_event(wake(8000, 1, 2, "loader"));                       // sched_waking at 8000
  t.on_event(sw(8500, 0, 1, 0, false));                         // on CPU at 8500
  t.on_event(sw(9000, 1, 0, 0, true, 0, 200));                  // its slice had waited 200 ns queued
  t.on_event(sw(9400, 0, 1, 0, false));                         // back after a preemption
  t.on_event(sw(9600, 1, 0, 1, false, 0, 999999));              // a queue wait longer than the gap: capped
  t.finish(10000);
  const ThreadInfo* i = t.find(1);
  REQUIRE(i != nullptr);
  CHECK(i->ns(ThreadState::sleeping) == 5000 + 300 + 400);  // block + wake-up delivery + final sleep
  CHECK(i->ns(ThreadState::runnable) == 200 + 400);
  CHECK(i->ns(ThreadState::running) == 2000 + 500 + 200);
}

TEST_CASE("thread table: exit closes the thread, time before the first event is not invented", "[timeline]") {
  Tables t;
  t.on_event(sw(5000, 3, 0, 1, false));  // first seen leaving the CPU: nothing before 5000 counted
  st_task_exit x{};
  x.hdr.size = sizeof(x);
  x.hdr.kind = ST_EV_TASK_EXIT;
  x.hdr.ts_ns = 6000;
  x.hdr.pid = kPid;
  x.hdr.tid = 3;
  std::strcpy(x.comm, "worker");
  t.on_event(Event{x});
  t.finish(9000);
  const ThreadInfo* i = t.find(3);
  REQUIRE(i != nullptr);
  CHECK(i->exited);
  CHECK(i->ns(ThreadState::running) == 0);
  CHECK(i->ns(ThreadState::sleeping) == 1000);
}

TEST_CASE("thread table: thread names that are not UTF-8 get U+FFFD, control characters are written out",
          "[timeline]") {
  Tables t;
  st_task_comm c{};
  c.hdr.size = sizeof(c);
  c.hdr.kind = ST_EV_TASK_COMM;
  c.hdr.pid = kPid;
  c.hdr.tid = 7;
  std::memcpy(c.comm, "job\xff\xc3", 5);
  t.on_event(Event{c});
  t.set_comm(kPid, 8, "w\x80");
  CHECK(t.find(7)->comm == "job\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(t.find(8)->comm == "w\xef\xbf\xbd");
  t.set_comm(kPid, 9, "\x1b]0;pwned\x07");
  CHECK(t.find(9)->comm == "\\x1b]0;pwned\\x07");
  // What the JSON sinks do with it: no exception.
  CHECK_NOTHROW(nlohmann::json(t.find(7)->comm).dump());
}

TEST_CASE("thread table: one state machine, the totals are the sums of the timeline's segments", "[timeline]") {
  // Wake-ups of a runnable or running thread, a thread first seen waking,
  // trims, preemptions and an exit: whatever the sequence, the table's
  // per-state times are what the segments add up to, and each waker's
  // blocked time is the blocked segments it ended.
  Tables t;
  t.on_event(wake(500, 4, 2, "loader"));            // tid 4 first seen waking
  t.on_event(sw(1000, 0, 4, 0, false));
  t.on_event(wake(1100, 4, 2, "loader"));           // woken while running: nothing
  t.on_event(sw(2000, 4, 0, 1, false));
  t.on_event(wake(2600, 4, 2, "loader"));
  t.on_event(wake(2700, 4, 5, "other"));            // woken again while runnable: nothing
  t.on_event(sw(3000, 0, 4, 0, false));
  t.on_event(sw(3500, 4, 0, 0, true, 0, 100));      // preempted; its slice waited 100 ns queued
  t.on_event(sw(3600, 0, 4, 0, false));
  t.on_event(sw(4000, 4, 0, 2, false));             // D
  t.on_event(wake(4800, 4, 5, "other"));
  t.on_event(sw(5000, 0, 4, 0, false, 0));
  t.on_event(sw(5100, 4, 0, 1, false, 0, 50));
  t.finish(6000);
  const ThreadInfo* i = t.find(4);
  const ThreadTimeline* tl = t.tl.find(4);
  REQUIRE(i != nullptr);
  REQUIRE(tl != nullptr);
  uint64_t sum[static_cast<int>(ThreadState::count_)] = {};
  size_t woken_blocks = 0;
  for (const auto& g : tl->segs) {
    sum[static_cast<int>(g.state)] += g.end - g.start;
    if ((g.state == ThreadState::sleeping || g.state == ThreadState::disk_wait) && g.waker_tid) ++woken_blocks;
  }
  for (int s = 0; s < static_cast<int>(ThreadState::count_); ++s) CHECK(i->state_ns[s] == sum[s]);
  CHECK(i->ns(ThreadState::running) == 1000 + 500 + 400 + 100);
  CHECK(i->ns(ThreadState::sleeping) == 600 + 300 + 900);   // 2000-2600, its trip to the CPU, 5100-6000
  // 500-1000 after the first sight; 2600-3000 less the 300 ns trip the
  // 100 ns queue wait leaves to the block; 3500-3600; 4800-5000 less 150.
  CHECK(i->ns(ThreadState::runnable) == 500 + 100 + 100 + 50);
  CHECK(i->ns(ThreadState::disk_wait) == 800 + 150);
  REQUIRE(i->wakers.count(2) == 1);
  CHECK(i->wakers.at(2).count == 2);        // first sight (no blocked time) and the 2000-2600 block
  CHECK(i->wakers.at(2).blocked_ns == 600);
  REQUIRE(i->wakers.count(5) == 1);
  CHECK(i->wakers.at(5).count == 1);        // the wake-up of a runnable thread is not an edge
  CHECK(i->wakers.at(5).blocked_ns == 800);
  CHECK(woken_blocks == 2);
}
