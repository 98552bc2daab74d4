// SPDX-License-Identifier: Apache-2.0
// Interval view of every target thread, kept for step reconstruction and
// attribution: scheduler state segments (with the waker that ended each
// block), accelerator ioctl spans, TCP send/recv spans, runtime-call spans
// from uprobes, block requests by issuing thread, and the process tree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/event.h"
#include "timeline/thread_table.h"
#include "util/grow_vector.h"

namespace steptrace {

struct StateSeg {
  uint64_t start = 0, end = 0;
  uint32_t waker_tid = 0;   // blocked segments: who ended the block
  uint32_t waker_pid = 0;
  int32_t blocked_sys = -1; // syscall the thread was blocked in
  // blocked segments: the syscall the waker was in, -1 when it was not in one
  // (or is not traced): a timer that fires while a traced thread runs user
  // code "wakes" the sleeper in that thread's name.
  int32_t waker_sys = -1;
  uint32_t preempted_by = 0; // runnable after preemption: the tid that took the CPU
  ThreadState state = ThreadState::unknown;
  // runnable: it left the CPU because its cgroup ran out of CPU quota
  // (ST_SWITCH_THROTTLED), so the wait is throttling, not a busy CPU.
  bool throttled = false;
  // running: the CPU it ran on (kNoCpu when not known), for NUMA placement.
  uint16_t cpu = 0xffff;
};
// A segment or two per record of a busy thread: the bulk of a window's
// memory (and of the pages the kernel zeroes for it). The small fields sit
// together at the end: 40 bytes, not the 48 of the order they were added in.
static_assert(sizeof(StateSeg) == 40, "StateSeg grew: keep the small fields together");
inline constexpr uint16_t kNoCpu = 0xffff;

// Time the host took from a thread (ST_EV_HOST_STEAL): interrupt handlers
// inside one of its on-CPU slices (`ns` of [start, end)), or a memory reclaim
// pass it ran itself (all of [start, end), ns = end - start).
struct HostSteal {
  uint64_t start = 0, end = 0;
  uint64_t ns = 0;
  uint32_t kind = 0;   // enum st_steal_kind
  uint32_t count = 0;  // handler runs / pages reclaimed
  uint32_t detail = 0; // softirq vectors
};

enum class SpanKind : uint8_t { ioctl, net_send, net_recv, nrt_execute, nrt_tensor_write, nrt_tensor_read, rdma_verb };

struct Span {
  uint64_t start = 0, end = 0;
  SpanKind kind = SpanKind::ioctl;
  uint16_t dev = 0xffff;  // ioctl: the device index (st_accel_ioctl.dev_index), 0xffff none
  uint32_t cmd = 0;       // ioctl command; rdma_verb: object << 16 | method
  uint32_t flags = 0;     // ST_ACCEL_* for ioctls; rdma_verb: legacy command number or ST_RDMA_NO_CMD
  uint64_t bytes = 0;
  uint64_t sock_id = 0;   // net spans
  int64_t ret = 0;
};

struct BlockIo {
  uint64_t start = 0, end = 0;  // issue (or insert) -> complete
  uint32_t dev = 0, bytes = 0;
  bool write = false;
};

// A thread's history: an entry or two per record of a busy thread, so tens
// of MiB each in a long window (see GrowVector: it grows without copying).
template <typename T>
using TimelineVector = GrowVector<T>;

struct ThreadTimeline {
  uint32_t pid = 0, tid = 0;
  TimelineVector<StateSeg> segs;     // contiguous, in time order
  TimelineVector<Span> spans;        // in end-time order
  TimelineVector<BlockIo> block;     // requests this thread caused
  std::vector<uint64_t> markers;     // steptrace_step() calls (one a step)
  TimelineVector<HostSteal> steals;  // in end-time order
  // open state
  ThreadState cur = ThreadState::unknown;
  uint64_t cur_since = 0;
  StateSeg pending;
  std::vector<std::pair<uint32_t, uint64_t>> open_calls;  // uprobe entries (probe, ts)
  // Set by finish(): the longest span and block request, so a search by
  // start time knows how far back an overlapping one can begin
  // (timeline/timeline_ranges.h).
  uint64_t max_span_ns = 0, max_block_ns = 0;
};

// The one scheduler state machine. `totals`, when given, is told of every
// segment it closes, every wake-delivery trim and every waker, so the
// ThreadTable's per-state totals are sums of these segments.
class TimelineStore {
 public:
  void on_event(const Event& e, ThreadTable* totals = nullptr);
  void finish(uint64_t end_ns, ThreadTable* totals = nullptr);

  // finish() on the live store for as long as the view lives, undone when it
  // goes: a fold analyses the window in place. A copy of the window would be
  // tens of MiB of fresh memory at every fold, and the kernel zeroing those
  // pages was most of a busy consumer's CPU. Nothing may change the store
  // while a view is open.
  class FinishedView {
   public:
    FinishedView(TimelineStore& store, uint64_t end_ns, ThreadTable* totals);
    ~FinishedView();
    FinishedView(const FinishedView&) = delete;
    FinishedView& operator=(const FinishedView&) = delete;

   private:
    struct Undo {
      uint64_t key = 0;
      uint64_t cur_since = 0;
      StateSeg pending;
      bool pushed = false;      // finish() appended the open segment
      bool resorted = false;    // the spans were re-sorted by start: `spans` holds them in arrival order
      TimelineVector<Span> spans;
    };
    TimelineStore& store_;
    std::vector<Undo> undo_;
  };

  // Keyed by thread_key(): the live thread of a tid under the tid itself,
  // an earlier thread whose tid was reused under a retired key. Read the
  // tid from the entry, never from the key.
  const std::unordered_map<uint64_t, ThreadTimeline>& threads() const { return threads_; }
  const ThreadTimeline* find(uint32_t tid) const;  // the live thread of that tid
  // Parent process of a process, from fork events (0 when unknown).
  uint32_t parent_of(uint32_t pid) const;
  // A parent learnt from /proc (a process that was running before tracing
  // began: its fork was never seen). A fork seen in the trace wins.
  void note_parent(uint32_t pid, uint32_t ppid) {
    if (pid && ppid) parent_.emplace(pid, ppid);
  }
  const std::map<uint32_t, uint32_t>& parents() const { return parent_; }
  const std::map<uint64_t, st_sock_tuple>& sockets() const { return socks_; }

  // Forget what ended before ts: segments, spans, block requests and markers
  // of every thread (the open state and open calls stay), dead threads with
  // nothing left, sockets no span refers to,
  // and parents of processes with no thread left. A windowed analysis calls
  // it once the steps before ts are folded, so the store holds a window.
  void forget_before(uint64_t ts);
  // forget_before() keeps the room a thread's last window filled (the next
  // one will likely fill it again); this gives back all room beyond twice
  // what each vector holds, for the memory cap.
  void give_back_room();
  // Entries held (segments + spans + block requests + markers), for the
  // memory estimate.
  size_t entries() const;
  size_t memory_bytes() const;  // with the room kept for more
  size_t used_bytes() const;    // what the entries fill

 private:
  ThreadTimeline& get(uint32_t pid, uint32_t tid);
  template <typename Count>
  size_t bytes_by(Count n_of) const;  // the estimate, each vector counted by n_of
  void move_to(ThreadTimeline& t, ThreadState s, uint64_t ts, ThreadTable* totals);
  void trim_wake_delivery(ThreadTimeline& t, uint64_t queue_ns, ThreadTable* totals);
  void on_switch(const st_sched_switch& e, ThreadTable* totals);
  void on_wakeup(const st_sched_wakeup& e, ThreadTable* totals);

  std::unordered_map<uint64_t, ThreadTimeline> threads_;
  uint64_t retired_ = 0;  // threads whose tid was reused
  std::map<uint32_t, uint32_t> parent_;   // child pid -> parent pid
  std::map<uint64_t, st_sock_tuple> socks_;
};

}  // namespace steptrace
