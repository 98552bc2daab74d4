// SPDX-License-Identifier: Apache-2.0
// Hand-built records for the steps and attribution unit tests: the ABI
// structs a ring buffer would deliver, fed to a TimelineStore and a
// ThreadTable together.
#pragma once

#include <cstdint>

#include "decode/event.h"
#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"

namespace steptrace::test {

constexpr uint64_t kMs = 1'000'000;

struct Feed {
  TimelineStore tl;
  ThreadTable tt;
  void operator()(const Event& e) {
    tt.on_event(e);
    tl.on_event(e, &tt);
  }
  void finish(uint64_t end_ns) { tl.finish(end_ns, &tt); }
};

inline st_event_header hdr(uint32_t kind, uint32_t size, uint32_t pid, uint32_t tid, uint64_t ts) {
  st_event_header h{};
  h.size = size;
  h.kind = kind;
  h.pid = pid;
  h.tid = tid;
  h.ts_ns = ts;
  return h;
}

// Thread (pid, tid) leaves the CPU at ts: prev_state 0 runnable, 1 sleeping.
inline Event switch_out(uint32_t pid, uint32_t tid, uint64_t ts, uint32_t prev_state = 1) {
  st_sched_switch e{};
  e.hdr = hdr(ST_EV_SCHED_SWITCH, sizeof(e), pid, tid, ts);
  e.prev_state = prev_state;
  e.prev_sys_nr = -1;
  e.prev_queue_ns = ST_QUEUE_UNKNOWN;
  e.flags = ST_SWITCH_PREV_TARGET;
  return Event{e};
}

// Thread (pid, tid) takes a CPU at ts.
inline Event switch_in(uint32_t pid, uint32_t tid, uint64_t ts) {
  st_sched_switch e{};
  e.hdr = hdr(ST_EV_SCHED_SWITCH, sizeof(e), 0, 0, ts);
  e.next_pid = pid;
  e.next_tid = tid;
  e.prev_sys_nr = -1;
  e.prev_queue_ns = ST_QUEUE_UNKNOWN;
  e.flags = ST_SWITCH_NEXT_TARGET;
  return Event{e};
}

inline Event wakeup(uint32_t pid, uint32_t tid, uint64_t ts, uint32_t waker_pid, uint32_t waker_tid) {
  st_sched_wakeup e{};
  e.hdr = hdr(ST_EV_SCHED_WAKEUP, sizeof(e), pid, tid, ts);
  e.waker_pid = waker_pid;
  e.waker_tid = waker_tid;
  e.waker_sys_nr = -1;
  e.wakee_sys_nr = -1;
  return Event{e};
}

inline Event uprobe(uint32_t pid, uint32_t tid, uint64_t ts, uint32_t probe, bool is_return) {
  st_uprobe e{};
  e.hdr = hdr(ST_EV_UPROBE, sizeof(e), pid, tid, ts);
  e.probe = probe;
  e.is_return = is_return ? 1 : 0;
  return Event{e};
}

inline Event ioctl(uint32_t pid, uint32_t tid, uint64_t enter, uint64_t exit, uint32_t cmd, uint32_t flags = 0,
                   uint64_t bytes = 0) {
  st_accel_ioctl e{};
  e.hdr = hdr(ST_EV_ACCEL_IOCTL, sizeof(e), pid, tid, exit);
  e.enter_ts = enter;
  e.cmd = cmd;
  e.flags = flags;
  e.bytes = bytes;
  return Event{e};
}

// A send of `bytes` that returned at `end` after `dur` ns.
inline Event send(uint32_t pid, uint32_t tid, uint64_t end, uint64_t dur, int32_t bytes) {
  st_net_xfer e{};
  e.hdr = hdr(ST_EV_NET_XFER, sizeof(e), pid, tid, end);
  e.sock_id = 7;
  e.dur_ns = dur;
  e.bytes = bytes;
  e.dir = ST_NET_SEND;
  return Event{e};
}

// Process `parent` forks process `child`.
inline Event fork_process(uint32_t parent, uint32_t child, uint64_t ts) {
  st_task_new e{};
  e.hdr = hdr(ST_EV_TASK_NEW, sizeof(e), parent, parent, ts);
  e.child_pid = child;
  e.child_tid = child;
  return Event{e};
}

}  // namespace steptrace::test
