// SPDX-License-Identifier: Apache-2.0
#include "timeline/timeline_store.h"

#include <algorithm>
#include <set>

namespace steptrace {

ThreadTimeline& TimelineStore::get(uint32_t pid, uint32_t tid) {
  auto& t = threads_[uint64_t{tid}];
  if (t.tid == 0) {
    t.tid = tid;
    t.pid = pid;
  }
  return t;
}

const ThreadTimeline* TimelineStore::find(uint32_t tid) const {
  auto it = threads_.find(uint64_t{tid});
  return it == threads_.end() ? nullptr : &it->second;
}

uint32_t TimelineStore::parent_of(uint32_t pid) const {
  auto it = parent_.find(pid);
  return it == parent_.end() ? 0 : it->second;
}

// Close the current segment at ts and open one in state s; `pending` carries
// the annotations (waker, preempting task) of the segment being opened.
void TimelineStore::move_to(ThreadTimeline& t, ThreadState s, uint64_t ts, ThreadTable* totals) {
  if (t.cur != ThreadState::unknown && t.cur != ThreadState::dead && ts >= t.cur_since) {
    StateSeg seg = t.pending;
    seg.start = t.cur_since;
    seg.end = ts;
    seg.state = t.cur;
    if (seg.end > seg.start) {
      t.segs.push_back(seg);
      if (totals) totals->add_time(t.pid, t.tid, seg.state, seg.end - seg.start);
    }
  }
  t.cur = s;
  t.cur_since = ts;
  t.pending = StateSeg{};
}

// The slice that is ending was preceded by [block][runnable]: the switch-out
// says how long of that runnable time was spent queued; the rest was the
// wake-up reaching a CPU and stays part of the block (and its waker).
void TimelineStore::trim_wake_delivery(ThreadTimeline& t, uint64_t queue_ns, ThreadTable* totals) {
  size_t n = t.segs.size();
  if (n < 2) return;
  StateSeg& wait = t.segs[n - 1];
  StateSeg& block = t.segs[n - 2];
  if (wait.state != ThreadState::runnable || wait.end != t.cur_since || block.end != wait.start ||
      (block.state != ThreadState::sleeping && block.state != ThreadState::disk_wait))
    return;
  uint64_t q = queued_since(wait.start, wait.end, queue_ns);
  if (totals && q > wait.start) totals->move_time(t.pid, t.tid, ThreadState::runnable, block.state, q - wait.start);
  block.end = q;
  wait.start = q;
  if (wait.start >= wait.end) t.segs.pop_back();
}

void TimelineStore::on_switch(const st_sched_switch& e, ThreadTable* totals) {
  const uint64_t ts = e.hdr.ts_ns;
  if (e.flags & ST_SWITCH_PREV_TARGET) {
    auto& t = get(e.hdr.pid, e.hdr.tid);
    if (t.cur == ThreadState::running) {
      trim_wake_delivery(t, e.prev_queue_ns, totals);
      t.pending.cpu = e.hdr.cpu < kNoCpu ? static_cast<uint16_t>(e.hdr.cpu) : kNoCpu;
    }
    ThreadState s = e.prev_state == 0        ? ThreadState::runnable
                    : (e.prev_state & 0x2)   ? ThreadState::disk_wait  // TASK_UNINTERRUPTIBLE
                                             : ThreadState::sleeping;
    move_to(t, s, ts, totals);
    if (s == ThreadState::runnable && (e.flags & ST_SWITCH_PREEMPT)) t.pending.preempted_by = e.next_tid;
    if (s == ThreadState::runnable && (e.flags & ST_SWITCH_THROTTLED)) t.pending.throttled = true;
    if (s != ThreadState::runnable) t.pending.blocked_sys = e.prev_sys_nr;
  }
  if (e.flags & ST_SWITCH_NEXT_TARGET) move_to(get(e.next_pid, e.next_tid), ThreadState::running, ts, totals);
}

void TimelineStore::on_wakeup(const st_sched_wakeup& e, ThreadTable* totals) {
  const uint64_t ts = e.hdr.ts_ns;
  auto& t = get(e.hdr.pid, e.hdr.tid);
  if (t.cur == ThreadState::sleeping || t.cur == ThreadState::disk_wait) {
    if (totals) totals->add_waker(e, ts >= t.cur_since ? ts - t.cur_since : 0);
    t.pending.waker_tid = e.waker_tid;
    t.pending.waker_pid = e.waker_pid;
    t.pending.waker_sys = e.waker_sys_nr;
    if (t.pending.blocked_sys < 0) t.pending.blocked_sys = e.wakee_sys_nr;
    move_to(t, ThreadState::runnable, ts, totals);
  } else if (t.cur == ThreadState::unknown) {
    // First seen waking: who woke it is known, how long it was blocked is not.
    if (totals && !(e.flags & ST_WAKE_NEW)) totals->add_waker(e, 0);
    move_to(t, ThreadState::runnable, ts, totals);
  }
  // A wake-up of a running or runnable thread (woken before it finished
  // switching out) changes nothing.
}

void TimelineStore::on_event(const Event& ev, ThreadTable* totals) {
  std::visit(
      [this, totals](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        const uint64_t ts = e.hdr.ts_ns;
        if constexpr (std::is_same_v<T, st_sched_switch>) {
          on_switch(e, totals);
        } else if constexpr (std::is_same_v<T, st_sched_wakeup>) {
          on_wakeup(e, totals);
        } else if constexpr (std::is_same_v<T, st_task_new>) {
          if (!(e.flags & ST_TASK_IS_THREAD)) parent_[e.child_pid] = e.hdr.pid;
          // A new task on the tid of a dead one: the dead thread's timeline
          // is kept under a retired key and the new task starts its own.
          if (auto it = threads_.find(uint64_t{e.child_tid});
              it != threads_.end() && it->second.cur == ThreadState::dead) {
            auto node = threads_.extract(it);
            node.key() = (++retired_ << 32) | e.child_tid;
            threads_.insert(std::move(node));
          }
          get(e.child_pid, e.child_tid);
        } else if constexpr (std::is_same_v<T, st_task_exit>) {
          move_to(get(e.hdr.pid, e.hdr.tid), ThreadState::dead, ts, totals);
        } else if constexpr (std::is_same_v<T, st_accel_ioctl>) {
          Span s;
          s.start = e.enter_ts;
          s.end = ts;
          s.kind = SpanKind::ioctl;
          s.dev = e.dev_index < 0xffff ? static_cast<uint16_t>(e.dev_index) : 0xffff;
          s.cmd = e.cmd;
          s.flags = e.flags;
          s.bytes = e.bytes;
          s.ret = e.ret;
          get(e.hdr.pid, e.hdr.tid).spans.push_back(s);
        } else if constexpr (std::is_same_v<T, st_rdma_verb>) {
          Span s;
          s.start = e.enter_ts;
          s.end = ts;
          s.kind = SpanKind::rdma_verb;
          s.cmd = static_cast<uint32_t>(e.object_id) << 16 | e.method_id;
          s.flags = e.write_cmd;
          s.bytes = e.bytes;
          s.ret = e.ret;
          get(e.hdr.pid, e.hdr.tid).spans.push_back(s);
        } else if constexpr (std::is_same_v<T, st_host_steal>) {
          auto& t = get(e.hdr.pid, e.hdr.tid);
          HostSteal h;
          h.end = ts;
          h.ns = e.ns;
          h.kind = e.kind;
          h.count = e.count;
          h.detail = e.detail;
          if (e.start_ns) {
            h.start = e.start_ns <= ts ? e.start_ns : ts;
          } else {
            // Interrupts inside the slice now ending: its switch-out follows
            // with the same timestamp.
            h.start = t.cur == ThreadState::running && t.cur_since <= ts ? t.cur_since : ts;
          }
          if (h.start < h.end || h.ns) t.steals.push_back(h);
        } else if constexpr (std::is_same_v<T, st_net_xfer>) {
          if (e.flags & ST_NET_ARRIVAL) return;  // a segment's arrival, not a call: no thread's time
          Span s;
          s.start = e.dur_ns && e.dur_ns < ts ? ts - e.dur_ns : ts;
          s.end = ts;
          s.kind = e.dir == ST_NET_SEND ? SpanKind::net_send : SpanKind::net_recv;
          s.bytes = static_cast<uint64_t>(e.bytes);
          s.sock_id = e.sock_id;
          get(e.hdr.pid, e.hdr.tid).spans.push_back(s);
          // sock_id is the connection key (Analysis gives a reused socket a new one).
          auto& tup = socks_[e.sock_id];
          if (tup.sport == 0 || tup.dport == 0) tup = e.tuple;
        } else if constexpr (std::is_same_v<T, st_block_rq>) {
          BlockIo b;
          b.start = e.issue_ts ? e.issue_ts : e.insert_ts;
          b.end = ts;
          b.dev = e.dev;
          b.bytes = e.bytes;
          b.write = e.flags & ST_RQ_WRITE;
          if (b.start && b.start <= b.end && e.hdr.tid) get(e.hdr.pid, e.hdr.tid).block.push_back(b);
        } else if constexpr (std::is_same_v<T, st_uprobe>) {
          auto& t = get(e.hdr.pid, e.hdr.tid);
          if (e.probe == ST_UP_STEP_MARKER) {
            if (!e.is_return) t.markers.push_back(ts);
            return;
          }
          if (!e.is_return) {
            t.open_calls.emplace_back(e.probe, ts);
            return;
          }
          // Match the innermost open call of the same function.
          for (auto it = t.open_calls.rbegin(); it != t.open_calls.rend(); ++it) {
            if (it->first != e.probe) continue;
            Span s;
            s.start = it->second;
            s.end = ts;
            s.ret = e.ret;
            s.kind = e.probe == ST_UP_NRT_EXECUTE        ? SpanKind::nrt_execute
                     : e.probe == ST_UP_NRT_TENSOR_WRITE ? SpanKind::nrt_tensor_write
                                                         : SpanKind::nrt_tensor_read;
            t.spans.push_back(s);
            t.open_calls.erase(std::next(it).base());
            break;
          }
        }
      },
      ev);
}

namespace {

// Erase the prefix of v (in time order by `end_of`) that ended before ts.
template <typename V, typename F>
void erase_ended(V& v, uint64_t ts, F end_of) {
  const size_t used = v.size();  // what the window that ends here held
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& x) { return end_of(x) >= ts; });
  v.erase(v.begin(), it);
  // What was forgotten goes back to the allocator (and out of memory_bytes())
  // once a window used under half of the room: a thread as busy as in the
  // last window fills it again, and memory given back and grown again is
  // memory the kernel zeroes again (most of a busy consumer's CPU, B5).
  // Room a window never touched costs no RSS (GrowVector maps lazily).
  if (v.capacity() > 64 && used < v.capacity() / 2) {
    V kept;
    kept.reserve(std::max<size_t>(used, 64));
    kept.insert(kept.end(), v.begin(), v.end());
    v.swap(kept);
  }
}

template <typename V>
void shrink_room(V& v) {
  if (v.capacity() > 64 && v.size() < v.capacity() / 2) v.shrink_to_fit();
}

}  // namespace

void TimelineStore::forget_before(uint64_t ts) {
  std::set<uint64_t> socks_used;
  std::set<uint32_t> pids;
  for (auto it = threads_.begin(); it != threads_.end();) {
    ThreadTimeline& t = it->second;
    erase_ended(t.segs, ts, [](const StateSeg& g) { return g.end; });
    // Spans arrive in end-time order (finish() re-sorts only a copy).
    erase_ended(t.spans, ts, [](const Span& s) { return s.end; });
    erase_ended(t.block, ts, [](const BlockIo& b) { return b.end; });
    erase_ended(t.markers, ts, [](uint64_t m) { return m; });
    erase_ended(t.steals, ts, [](const HostSteal& h) { return h.end; });
    const bool idle = t.segs.empty() && t.spans.empty() && t.block.empty() && t.markers.empty() &&
                      t.steals.empty() && t.open_calls.empty();
    if (idle && t.cur == ThreadState::dead) {
      it = threads_.erase(it);
      continue;
    }
    for (const auto& s : t.spans)
      if (s.sock_id) socks_used.insert(s.sock_id);
    pids.insert(t.pid);
    ++it;
  }
  for (auto it = socks_.begin(); it != socks_.end();) it = socks_used.count(it->first) ? std::next(it) : socks_.erase(it);
  for (auto it = parent_.begin(); it != parent_.end();) {
    // Kept while the child still has threads.
    it = pids.count(it->first) ? std::next(it) : parent_.erase(it);
  }
}

void TimelineStore::give_back_room() {
  for (auto& [key, t] : threads_) {
    shrink_room(t.segs);
    shrink_room(t.spans);
    shrink_room(t.block);
    shrink_room(t.markers);
    shrink_room(t.steals);
  }
}

size_t TimelineStore::entries() const {
  size_t n = 0;
  for (const auto& [key, t] : threads_)
    n += t.segs.size() + t.spans.size() + t.block.size() + t.markers.size() + t.steals.size();
  return n;
}

template <typename Count>
size_t TimelineStore::bytes_by(Count n_of) const {
  size_t n = threads_.size() * (sizeof(ThreadTimeline) + 32) + socks_.size() * 64 + parent_.size() * 48;
  for (const auto& [key, t] : threads_)
    n += n_of(t.segs) * sizeof(StateSeg) + n_of(t.spans) * sizeof(Span) + n_of(t.block) * sizeof(BlockIo) +
         n_of(t.markers) * sizeof(uint64_t) + n_of(t.steals) * sizeof(HostSteal);
  return n;
}

size_t TimelineStore::memory_bytes() const {
  return bytes_by([](const auto& v) { return v.capacity(); });
}

size_t TimelineStore::used_bytes() const {
  return bytes_by([](const auto& v) { return v.size(); });
}

namespace {
const auto span_by_start = [](const Span& a, const Span& b) { return a.start < b.start; };

void note_longest(ThreadTimeline& t) {
  t.max_span_ns = t.max_block_ns = 0;
  for (const auto& s : t.spans) t.max_span_ns = std::max(t.max_span_ns, s.end - s.start);
  for (const auto& b : t.block) t.max_block_ns = std::max(t.max_block_ns, b.end - b.start);
}
}  // namespace

void TimelineStore::finish(uint64_t end_ns, ThreadTable* totals) {
  for (auto& [key, t] : threads_) {
    if (t.cur != ThreadState::unknown && t.cur != ThreadState::dead) {
      ThreadState s = t.cur;
      move_to(t, s, end_ns, totals);
    }
    // Spans arrive in end order, which is start order too unless calls nest
    // (an uprobe span around its ioctls): a thread of ioctls alone skips the sort.
    if (!std::is_sorted(t.spans.begin(), t.spans.end(), span_by_start))
      std::stable_sort(t.spans.begin(), t.spans.end(), span_by_start);
    note_longest(t);
  }
}

TimelineStore::FinishedView::FinishedView(TimelineStore& store, uint64_t end_ns, ThreadTable* totals)
    : store_(store) {
  undo_.reserve(store.threads_.size());
  for (auto& [key, t] : store.threads_) {
    Undo u;
    u.key = key;
    u.cur_since = t.cur_since;
    u.pending = t.pending;
    if (t.cur != ThreadState::unknown && t.cur != ThreadState::dead) {
      const size_t before = t.segs.size();
      store.move_to(t, t.cur, end_ns, totals);
      u.pushed = t.segs.size() > before;
    }
    if (!std::is_sorted(t.spans.begin(), t.spans.end(), span_by_start)) {
      // Nested calls (rare: uprobe spans around ioctls) keep a copy in arrival order.
      u.spans = t.spans;
      u.resorted = true;
      std::stable_sort(t.spans.begin(), t.spans.end(), span_by_start);
    }
    note_longest(t);
    undo_.push_back(std::move(u));
  }
}

TimelineStore::FinishedView::~FinishedView() {
  for (auto& u : undo_) {
    auto it = store_.threads_.find(u.key);
    if (it == store_.threads_.end()) continue;  // cannot happen: nothing changes the store while a view is open
    ThreadTimeline& t = it->second;
    if (u.pushed) t.segs.pop_back();
    t.cur_since = u.cur_since;
    t.pending = u.pending;
    if (u.resorted) t.spans.swap(u.spans);
  }
}

}  // namespace steptrace
