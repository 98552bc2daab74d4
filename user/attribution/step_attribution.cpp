// SPDX-License-Identifier: Apache-2.0
#include "attribution/step_attribution.h"

#include <algorithm>
#include <tuple>

#include "attribution/interval_painter.h"
#include "decode/neuron_cmd.h"
#include "decode/syscalls.h"
#include "steps/span_classes.h"
#include "timeline/timeline_ranges.h"
#include "util/intervals.h"

namespace steptrace {

using steps::is_ack;
using steps::is_blocked;
using steps::is_h2d;
using steps::is_kick;
using steps::is_net;

namespace {

// Loaders' share of time on storage vs CPU during [s, e).
// What the loaders did while the main thread waited for a batch in [s, e),
// summed over them: on a CPU, on storage, waiting out their cgroup's CPU
// quota, and (inside the first two) in memory reclaim.
// A thread's reclaim passes clipped to [s, e). Passes are sorted by end; a
// pass is short (bounded by what one allocation reclaims), so one ending
// over a second after e is past every pass that starts before e.
uint64_t reclaim_in(const ThreadTimeline& t, uint64_t s, uint64_t e) {
  uint64_t ns = 0;
  auto it = std::partition_point(t.steals.begin(), t.steals.end(), [s](const HostSteal& h) { return h.end <= s; });
  for (; it != t.steals.end(); ++it) {
    if (it->start >= e) {
      if (it->end > e + 1'000'000'000ull) break;
      continue;
    }
    if (it->kind == ST_STEAL_DIRECT_RECLAIM || it->kind == ST_STEAL_MEMCG_RECLAIM)
      ns += overlap_ns(it->start, it->end, s, e);
  }
  return ns;
}

struct LoaderWork {
  uint64_t io = 0, cpu = 0, throttled = 0, reclaim = 0;
};

void split_data_wait(const steps::RankSteps& r, uint64_t s, uint64_t e, LoaderWork& w) {
  for (const auto* lt : r.loader_threads) {
    for (auto it = segs_ending_after(*lt, s); it != lt->segs.end(); ++it) {
      const auto& g = *it;
      if (g.start >= e) break;
      uint64_t ov = overlap_ns(g.start, g.end, s, e);
      if (g.state == ThreadState::running) w.cpu += ov;
      else if (g.state == ThreadState::disk_wait) w.io += ov;
      else if (g.state == ThreadState::runnable && g.throttled) w.throttled += ov;
    }
    // O_DIRECT reads may sleep in S rather than D: count in-flight block I/O too.
    for (auto it = block_ending_after(*lt, s); it != lt->block.end(); ++it) {
      const auto& b = *it;
      if (b.end >= e + lt->max_block_ns) break;  // every later one starts after e
      if (b.start >= e || b.write) continue;
      w.io += overlap_ns(b.start, b.end, s, e) / 2;  // half weight: avoid double counting a D-state wait
    }
    w.reclaim += reclaim_in(*lt, s, e);
  }
}

// Interrupt time inside the main thread's slices and its reclaim passes,
// clipped to [ws, we) (a slice's interrupt time is spread evenly over it).
void add_main_steals(const ThreadTimeline& t, uint64_t ws, uint64_t we, StepResult& st) {
  for (auto g = segs_ending_after(t, ws); g != t.segs.end() && g->start < we; ++g)
    if (g->state == ThreadState::runnable && g->throttled) st.throttled_wait_ns += overlap_ns(g->start, g->end, ws, we);
  auto it = std::partition_point(t.steals.begin(), t.steals.end(), [ws](const HostSteal& h) { return h.end <= ws; });
  for (; it != t.steals.end(); ++it) {
    const HostSteal& h = *it;
    if (h.start >= we) {
      // Sorted by end: a later one can still start inside only if this one is long.
      if (h.end > we + 1'000'000'000ull) break;
      continue;
    }
    const uint64_t ov = overlap_ns(h.start, h.end, ws, we);
    if (h.kind == ST_STEAL_DIRECT_RECLAIM || h.kind == ST_STEAL_MEMCG_RECLAIM) {
      st.reclaim_ns += ov;
      continue;
    }
    const uint64_t len = h.end - h.start;
    const uint64_t part = len ? static_cast<uint64_t>(static_cast<double>(h.ns) * static_cast<double>(ov) /
                                                     static_cast<double>(len))
                              : (h.end >= ws && h.end < we ? h.ns : 0);
    if (h.kind == ST_STEAL_IRQ) st.irq_ns += part;
    else if (h.kind == ST_STEAL_SOFTIRQ) {
      st.softirq_ns += part;
      if (part) st.softirq_vecs |= h.detail;
    }
  }
}

// Loaders' busy time during [s, e), summed over them: on a CPU, waiting for
// one, or waiting on storage. What the main thread does not wait for of it
// overlapped the step (prefetch).
uint64_t loader_busy(const steps::RankSteps& r, uint64_t s, uint64_t e) {
  uint64_t ns = 0;
  for (const auto* lt : r.loader_threads)
    for (auto it = segs_ending_after(*lt, s); it != lt->segs.end() && it->start < e; ++it)
      if (it->state == ThreadState::running || it->state == ThreadState::runnable ||
          it->state == ThreadState::disk_wait)
        ns += overlap_ns(it->start, it->end, s, e);
  return ns;
}

// Inside execution [a, b): the end of the last queue kick (the device starts
// then) and the poller's notice of completion (its first ioctl after the
// kicks - the acknowledgement - or the return).
std::pair<uint64_t, uint64_t> kick_end_and_notice(const ThreadTimeline& t, uint64_t a, uint64_t b) {
  uint64_t last_kick_end = a, notice = b;
  for (auto it = spans_starting_from(t, a); it != t.spans.end() && it->start < b; ++it)
    if (it->end <= b && is_kick(*it)) last_kick_end = std::max(last_kick_end, it->end);
  for (auto it = spans_starting_from(t, last_kick_end); it != t.spans.end() && it->start < b; ++it)
    if (it->kind == SpanKind::ioctl) {
      notice = it->start;
      break;
    }
  return {last_kick_end, notice};
}

}  // namespace

// The device finished somewhere between the poller's last look that found
// nothing (the end of its last slice on a CPU before the final wait for a
// CPU) and its notice: each execution bounds its device time (kick end to
// finish) from below and above. A steady job repeats the same executions,
// so the bounds of many executions close in on one device time: between
// the 90th percentile of the lower bounds and the 10th of the upper ones
// (robust to a few odd executions). 0 (unknown) with fewer than 3.
uint64_t estimate_device_ns(const ThreadTimeline& t, const std::vector<steps::Anchor>& anchors) {
  std::vector<uint64_t> lo, hi, mid;
  for (const auto& an : anchors) {
    auto [k, n] = kick_end_and_notice(t, an.start, an.end);
    if (n <= k) continue;
    uint64_t last_look = k;  // the poller was on CPU right after the kicks
    for (auto it = segs_ending_after(t, k); it != t.segs.end(); ++it) {
      const auto& g = *it;
      if (g.start >= n) break;
      if (g.state != ThreadState::running) continue;
      if (g.end >= n) break;  // the slice in which it noticed
      last_look = std::max(last_look, g.end);
    }
    lo.push_back(last_look - k);
    hi.push_back(n - k);
    mid.push_back((last_look - k + n - k) / 2);
  }
  if (lo.size() < 3) return 0;
  std::sort(lo.begin(), lo.end());
  std::sort(hi.begin(), hi.end());
  uint64_t l = lo[lo.size() * 9 / 10], h = hi[hi.size() / 10];
  return l <= h ? l + (h - l) / 2 : median_ns(mid);
}

namespace {

// What paint_runnable asks of one execution, found once per step: a
// busy-polling rank has hundreds of runnable stretches in one execution, and
// looking forward from each for a later one was quadratic (issue 19).
struct ExecNotice {
  bool known = false;
  uint64_t last_kick_end = 0, notice = 0;
  bool runnable_before_notice = false;
  uint64_t last_runnable_start = 0;  // the last runnable stretch that starts after a and ends by notice
};

const ExecNotice& exec_notice(const ThreadTimeline& t, uint64_t a, uint64_t b, ExecNotice& en) {
  if (en.known) return en;
  en.known = true;
  std::tie(en.last_kick_end, en.notice) = kick_end_and_notice(t, a, b);
  // Segments are contiguous: those before the first that ends after notice end by it.
  for (auto it = segs_ending_after(t, en.notice); it != t.segs.begin();) {
    --it;
    if (it->start <= a) break;
    if (it->state == ThreadState::runnable) {
      en.runnable_before_notice = true;
      en.last_runnable_start = it->start;
      break;
    }
  }
  return en;
}

// Runnable-but-not-running time is CPU contention, except while the runtime
// busy-polls for the device inside nrt_execute: there the device is working
// anyway and the wait does not lengthen the step. Exceptions inside the
// execution: waits inside its ioctls (submission and acknowledgement), and
// the wait during which the device finished: the last runnable stretch
// before the poller noticed completion - from the device's estimated
// finish (kick end + typical device time) when known, else all of it.
void paint_runnable(const ThreadTimeline& t, const StateSeg& g, const std::vector<std::pair<uint64_t, uint64_t>>& exec,
                    std::vector<ExecNotice>& notices, uint64_t typical_device_ns, std::vector<Paint>& paints) {
  constexpr int kPrio = 10;
  for (size_t k = 0; k < exec.size(); ++k) {
    const auto [a, b] = exec[k];
    if (g.end <= a || g.start >= b) continue;
    if (g.start < a) paints.push_back({g.start, a, kPrio, Category::cpu_contention, false, g.throttled});
    if (g.end > b) paints.push_back({b, g.end, kPrio, Category::cpu_contention, false, g.throttled});
    uint64_t is = std::max(g.start, a), ie = std::min(g.end, b);
    const ExecNotice& en = exec_notice(t, a, b, notices[k]);
    const uint64_t last_kick_end = en.last_kick_end, notice = en.notice;
    bool completion_wait = false;
    if (is >= notice) {
      completion_wait = true;
    } else if (ie <= notice) {
      // Unless a later runnable stretch also ends before `notice` (one after
      // g starts after a: g overlaps the execution).
      completion_wait = !(en.runnable_before_notice && en.last_runnable_start > g.start);
    }
    if (completion_wait) {
      uint64_t from = is;
      if (typical_device_ns && is < notice)
        from = std::clamp(last_kick_end + typical_device_ns, is, std::min(ie, notice));
      if (ie > from) paints.push_back({from, ie, kPrio, Category::cpu_contention, false, g.throttled});
    } else {
      for (auto it = spans_overlapping_from(t, is); it != t.spans.end() && it->start < ie; ++it)
        if (it->kind == SpanKind::ioctl && it->end > is)
          paints.push_back({std::max(it->start, is), std::min(it->end, ie), kPrio, Category::cpu_contention, false,
                            g.throttled});
    }
    return;
  }
  paints.push_back({g.start, g.end, kPrio, Category::cpu_contention, false, g.throttled});
}

using Exec = std::vector<std::pair<uint64_t, uint64_t>>;

// Two copy calls at most this far apart are one run of submissions.
constexpr uint64_t kCopyLoopNs = 50'000;

// Spans inside [ws, we): submissions, copies, runtime tensor calls and EFA
// control-path calls painted; the send/recv calls returned for the collective.
std::vector<const Span*> paint_spans(const ThreadTimeline& t, uint64_t ws, uint64_t we, const Exec& exec,
                                     StepResult& st, std::vector<Paint>& paints) {
  std::vector<const Span*> net;
  uint64_t copies_end = 0;  // the latest end of a copy call so far
  for (auto it = spans_overlapping_from(t, ws); it != t.spans.end() && it->start < we; ++it) {
    const Span& s = *it;
    if (s.end <= ws) continue;
    if (is_net(s)) net.push_back(&s);
    // Back-to-back copies (a runtime writing a batch's tensors one by one):
    // the few microseconds between two are the loop that submits them, most
    // of it the probes' own entry and return, not host work of the step.
    const bool copy = s.kind == SpanKind::nrt_tensor_write || s.kind == SpanKind::nrt_tensor_read ||
                      (s.kind == SpanKind::ioctl && neuron_cmd_class(s.cmd) == NEURON_CLASS_COPY);
    if (copy && s.start > copies_end && copies_end && s.start - copies_end <= kCopyLoopNs)
      paints.push_back({copies_end, s.start, 5, Category::dma_submission});
    if (copy) copies_end = std::max(copies_end, s.end);
    if (s.kind == SpanKind::ioctl) {
      auto c = neuron_cmd_class(s.cmd);
      // Completion acknowledgements inside an execution are part of waiting for
      // the device, not submission (descriptor writes and queue kicks are).
      bool ack_in_exec = false;
      if (is_ack(s))
        for (const auto& [a, b] : exec)
          if (s.start >= a && s.end <= b) ack_in_exec = true;
      if ((c == NEURON_CLASS_SUBMIT || c == NEURON_CLASS_SYNC) && !ack_in_exec)
        paints.push_back({s.start, s.end, 9, Category::dma_submission, true});  // StepResult::exec_submit_ns
      if (c == NEURON_CLASS_COPY) {
        paints.push_back({s.start, s.end, 5, Category::dma_submission});
        st.copy_bytes += s.bytes;
        ++st.copies;
      }
    } else if (s.kind == SpanKind::nrt_tensor_write || s.kind == SpanKind::nrt_tensor_read) {
      paints.push_back({s.start, s.end, 5, Category::dma_submission});
    } else if (s.kind == SpanKind::rdma_verb) {
      // EFA control path inside a step (registering a buffer, a queue pair):
      // the communication library's cost, paid on the hot path.
      paints.push_back({s.start, s.end, 9, Category::collective});
    }
  }
  return net;
}

// Host collective: clusters of send/recv calls not separated by device work.
// A collective is a run of send/recv calls; the time between them (poll
// waits for a peer, reductions on the CPU) belongs to it unless device
// work or input copies come in between. A readiness wait (poll, epoll,
// select) that ends right before the first call is part of it too.
void paint_host_collectives(const ThreadTimeline& t, const std::vector<const Span*>& net, uint64_t ws,
                            const Exec& exec, StepResult& st, std::vector<Paint>& paints) {
  auto other_work_between = [&](uint64_t a, uint64_t b) {
    for (const auto& [x, y] : exec)
      if (x < b && y > a) return true;
    for (auto it = spans_overlapping_from(t, a); it != t.spans.end() && it->start < b; ++it)
      if (it->end > a && is_h2d(*it)) return true;
    return false;
  };
  for (size_t i = 0; i < net.size();) {
    uint64_t cs = net[i]->start, ce = net[i]->end;
    size_t j = i + 1;
    while (j < net.size() && !other_work_between(ce, net[j]->start)) {
      ce = std::max(ce, net[j]->end);
      ++j;
    }
    // Segments before ws end by ws, and cs >= ws or the loop stops at once: start at ws.
    for (auto it = segs_starting_from(t, ws); it != t.segs.end(); ++it) {
      const auto& g = *it;
      if (g.end > cs) break;
      if (is_blocked(g.state) && cs - g.end < 2'000'000ull && is_readiness_wait(g.blocked_sys)) cs = g.start;
    }
    paints.push_back({cs, ce, 4, Category::collective});
    if (st.arrival_ns == 0) {
      st.arrival_ns = cs;
      st.host_collective = true;
    }
    i = j;
  }
}

// Who a blocked segment of the main thread waited for.
enum class WaitedFor { unknown, loader, comm };

WaitedFor waker_class(const steps::RankSteps& r, const StateSeg& g) {
  if (r.loaders.count(g.waker_tid)) return WaitedFor::loader;
  if (r.comm_threads.count(g.waker_tid)) return WaitedFor::comm;
  return WaitedFor::unknown;
}

// A readiness wait (poll, select, epoll) with no known waker that the thread
// took up again after a moment on a CPU, in the same call: one wait retried
// after a timeout, and the attempt that succeeded names what every attempt
// waited for. A DataLoader's first next(it) polls its result queue in 5 s
// attempts while its workers start: a CI run under load traced 5.0-6.0 s of
// step 0's 7.7 s wait for them as "other", the timer having ended the first.
constexpr uint64_t kRetryRunNs = 2'000'000;  // on a CPU between two attempts, at most
constexpr int kMaxRetries = 32;

WaitedFor retried_wait_class(const steps::RankSteps& r, TimelineVector<StateSeg>::const_iterator it,
                             TimelineVector<StateSeg>::const_iterator end) {
  const int32_t sys = it->blocked_sys;
  if (!is_readiness_wait(sys)) return WaitedFor::unknown;
  uint64_t ran = 0;
  int attempts = 0;
  for (auto nx = std::next(it); nx != end; ++nx) {
    switch (nx->state) {
      case ThreadState::running:
        ran += nx->end - nx->start;
        if (ran > kRetryRunNs) return WaitedFor::unknown;
        break;
      case ThreadState::runnable: break;  // a wait for a CPU: the thread did nothing
      case ThreadState::sleeping:
      case ThreadState::disk_wait:
        if (nx->blocked_sys != sys) return WaitedFor::unknown;
        if (const WaitedFor w = waker_class(r, *nx); w != WaitedFor::unknown) return w;
        if (++attempts >= kMaxRetries) return WaitedFor::unknown;
        ran = 0;
        break;
      default: return WaitedFor::unknown;
    }
  }
  return WaitedFor::unknown;
}

// The main thread's state segments inside the step; returns its waits for
// a loader (data loading), clipped to the step.
Exec paint_segments(const steps::RankSteps& r, const Exec& exec, uint64_t typical_device_ns, StepResult& st,
                    std::vector<Paint>& paints) {
  const auto& t = *r.main;
  const uint64_t ws = st.start_ns, we = st.end_ns;
  Exec data_waits;
  std::vector<ExecNotice> notices(exec.size());
  for (auto it = segs_ending_after(t, ws); it != t.segs.end(); ++it) {
    const auto& g = *it;
    if (g.start >= we) break;
    switch (g.state) {
      case ThreadState::running: paints.push_back({g.start, g.end, 2, Category::host_overhead}); break;
      case ThreadState::runnable: paint_runnable(t, g, exec, notices, typical_device_ns, paints); break;
      case ThreadState::sleeping:
      case ThreadState::disk_wait: {
        WaitedFor w = waker_class(r, g);
        if (w == WaitedFor::unknown) w = retried_wait_class(r, it, t.segs.end());
        if (w == WaitedFor::loader) {
          paints.push_back({g.start, g.end, 3, Category::data_loading});
          // Its wake-up's wait for a CPU is contention, beneath which lies
          // the wait for the batch (interval_painter.h: Painted::under).
          if (auto nx = std::next(it); nx != t.segs.end() && nx->state == ThreadState::runnable)
            paints.push_back({nx->start, nx->end, 0, Category::data_loading});
          data_waits.emplace_back(std::max(g.start, ws), std::min(g.end, we));
        } else if (w == WaitedFor::comm) {
          // Woken by the thread that moves the collective's bytes: waiting for it.
          paints.push_back({g.start, g.end, 3, Category::collective});
          if (st.arrival_ns == 0) {
            st.arrival_ns = g.start;
            st.host_collective = true;
          }
        } else {
          paints.push_back({g.start, g.end, 1, Category::other});
        }
        break;
      }
      default: break;
    }
  }
  return data_waits;
}

// A CPU-only rank's collective in flight (handed to a communication worker
// until it finished) is collective time whatever the main thread does
// meanwhile - the job's own timers count it so, and the step cannot end
// before it does. Above everything the main thread does meanwhile, waiting
// for a CPU included (the DDP job's hook timers agree within 0.5 pp this way;
// below contention the share came out 4.4 pp short on both ranks). The part
// in which the main thread ran is kept as a sub-share.
void paint_in_flight(const steps::RankSteps& r, StepResult& st, std::vector<Paint>& paints) {
  const uint64_t ws = st.start_ns, we = st.end_ns;
  bool arrival_from_in_flight = false;
  auto it = std::partition_point(r.in_flight.begin(), r.in_flight.end(),
                                 [ws](const std::pair<uint64_t, uint64_t>& x) { return x.second <= ws; });
  for (; it != r.in_flight.end() && it->first < we; ++it) {
    const uint64_t a = std::max(it->first, ws), b = std::min(it->second, we);
    // The rank arrives at the step's collective when it hands the first
    // bucket over. Every rank does, every step; its wait for the result at
    // the end of the backward pass is no arrival - the late rank often has
    // none, its all-reduce done behind its backward pass because the others
    // were waiting for it.
    if (it->first >= ws && !arrival_from_in_flight) {
      st.arrival_ns = it->first;
      st.host_collective = true;
      arrival_from_in_flight = true;
    }
    paints.push_back({a, b, 11, Category::collective});
    for (auto g = segs_ending_after(*r.main, a); g != r.main->segs.end() && g->start < b; ++g)
      if (g->state == ThreadState::running) st.collective_on_cpu_ns += overlap_ns(g->start, g->end, a, b);
  }
}

}  // namespace

void attribute_step(const steps::RankSteps& r, uint64_t typical_device_ns, StepResult& st,
                    std::vector<Paint>* paints_out) {
  const auto& t = *r.main;
  const uint64_t ws = st.start_ns, we = st.end_ns;
  std::vector<Paint> paints;
  Exec exec;
  if (!r.host_only) {
    const uint64_t from = ws > r.max_anchor_ns ? ws - r.max_anchor_ns : 0;
    auto a = std::partition_point(r.anchors.begin(), r.anchors.end(), [from](const steps::Anchor& x) { return x.start < from; });
    for (; a != r.anchors.end() && a->start < we; ++a)
      if (a->end > ws) exec.emplace_back(a->start, a->end);
  }
  for (const auto& [a, b] : exec) paints.push_back({a, b, 8, Category::device_execute});

  const std::vector<const Span*> net = paint_spans(t, ws, we, exec, st, paints);
  paint_host_collectives(t, net, ws, exec, st, paints);
  const Exec data_waits = paint_segments(r, exec, typical_device_ns, st, paints);
  paint_in_flight(r, st, paints);
  const Painted painted = paint_window_under(ws, we, paints, Category::cpu_contention);
  st.ns = painted.ns;
  st.contention_under = painted.under;
  st.exec_submit_ns = painted.tagged_ns;
  st.throttled_ns = painted.throttled_ns;
  // Split data loading by what the loaders did meanwhile: storage,
  // preprocessing, waiting out a CPU quota, and memory reclaim (which they
  // ran on a CPU or while blocked: taken from those two in proportion).
  LoaderWork w;
  for (const auto& [a, b] : data_waits) split_data_wait(r, a, b, w);
  const uint64_t dl = st.ns[static_cast<size_t>(Category::data_loading)];
  const double busy = static_cast<double>(w.io + w.cpu), total = busy + static_cast<double>(w.throttled);
  if (total > 0) {
    const double rc = std::min(static_cast<double>(w.reclaim), busy);
    auto part = [&](double x) { return static_cast<uint64_t>(static_cast<double>(dl) * x / total); };
    st.data_reclaim_ns = part(rc);
    st.data_throttled_ns = part(static_cast<double>(w.throttled));
    st.data_storage_ns = busy > 0 ? part(static_cast<double>(w.io) * (1.0 - rc / busy)) : 0;
    st.data_preprocess_ns = dl - std::min(dl, st.data_reclaim_ns + st.data_throttled_ns + st.data_storage_ns);
  } else {
    st.data_preprocess_ns = dl;
  }
  add_main_steals(t, ws, we, st);
  if (st.arrival_ns == 0 && !exec.empty()) st.arrival_ns = exec.front().first;
  st.loader_busy_ns = loader_busy(r, ws, we);
  for (const auto* lt : r.loader_threads) st.loader_reclaim_ns += reclaim_in(*lt, ws, we);
  if (paints_out) *paints_out = std::move(paints);
}

}  // namespace steptrace
