// SPDX-License-Identifier: Apache-2.0
#include "attribution/job_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "attribution/interval_painter.h"
#include "attribution/verdict.h"
#include "decode/neuron_cmd.h"
#include "signals/device_signals.h"

namespace steptrace {

const char* step_source_name(StepSource s) {
  switch (s) {
    case StepSource::runtime_probes: return "runtime probes (nrt_execute)";
    case StepSource::marker: return "step marker (steptrace_step)";
    case StepSource::automatic: return "automatic (accelerator queue kicks)";
    case StepSource::automatic_host: return "automatic (collective traffic period)";
    default: return "none";
  }
}

namespace {

constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();

bool is_ioctl_class(const Span& s, neuron_ioctl_class c) {
  return s.kind == SpanKind::ioctl && neuron_cmd_class(s.cmd) == c;
}
bool is_h2d(const Span& s) {
  return s.kind == SpanKind::nrt_tensor_write || (is_ioctl_class(s, NEURON_CLASS_COPY) && (s.flags & ST_ACCEL_H2D));
}
bool is_d2h(const Span& s) {
  return s.kind == SpanKind::nrt_tensor_read || (is_ioctl_class(s, NEURON_CLASS_COPY) && (s.flags & ST_ACCEL_D2H));
}
bool is_net(const Span& s) { return s.kind == SpanKind::net_send || s.kind == SpanKind::net_recv; }
bool is_kick(const Span& s) { return s.kind == SpanKind::ioctl && s.cmd == NEURON_CMD_DMA_QUEUE_COPY_START; }
bool is_ack(const Span& s) { return s.kind == SpanKind::ioctl && s.cmd == NEURON_CMD_DMA_ACK_COMPLETED; }
// poll, select, epoll_wait, pselect6, ppoll, epoll_pwait, epoll_pwait2 (x86_64)
bool is_readiness_wait(int32_t nr) {
  return nr == 7 || nr == 23 || nr == 232 || nr == 270 || nr == 271 || nr == 281 || nr == 441;
}
bool is_blocked(ThreadState s) { return s == ThreadState::sleeping || s == ThreadState::disk_wait; }

uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  uint64_t s = std::max(a0, b0), e = std::min(a1, b1);
  return e > s ? e - s : 0;
}

uint64_t median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Anchor {
  uint64_t start, end;
};

// One rank being analysed.
struct RankCtx {
  RankResult res;
  const ThreadTimeline* main = nullptr;
  std::set<uint32_t> loaders;  // tids that hand batches to the main thread
  std::vector<const ThreadTimeline*> loader_threads;
  std::vector<Anchor> anchors;
  // No accelerator (a CPU-only job): the anchors are the collective's
  // traffic bursts, one per step, not executions.
  bool host_only = false;
  std::set<uint32_t> comm_threads;  // threads of the rank that move the collective's bytes
  // Typical device time of one execution (last queue kick to completion),
  // from the executions whose completion the poller saw at once; 0 unknown.
  uint64_t typical_device_ns = 0;
};

// Execution anchors when no runtime probe fired: a burst of queue kicks
// starts an execution; the completion acknowledgement (or the next host
// activity on the device) ends it. Between them the runtime busy-polls.
std::vector<Anchor> anchors_from_ioctls(const ThreadTimeline& t) {
  std::vector<Anchor> out;
  const auto& sp = t.spans;
  size_t i = 0;
  while (i < sp.size()) {
    if (!is_kick(sp[i])) {
      ++i;
      continue;
    }
    Anchor a{sp[i].start, sp[i].end};
    size_t j = i + 1;
    while (j < sp.size() && (is_kick(sp[j]) || !(sp[j].kind == SpanKind::ioctl))) {
      if (is_kick(sp[j])) a.end = sp[j].end;
      ++j;
    }
    // The execution lasts until the acknowledgement, or the next ioctl.
    if (j < sp.size()) a.end = is_ack(sp[j]) ? sp[j].end : sp[j].start;
    out.push_back(a);
    i = j + (j < sp.size() && is_ack(sp[j]) ? 1 : 0);
  }
  return out;
}

// Where step k begins, between the end of the previous execution (lo) and
// the start of this one (hi): after the previous step's tail (output copies,
// host collective, host compute), at the first wait for a batch from a
// loader or, when the batch was ready, at the first input copy.
uint64_t find_boundary(const RankCtx& r, uint64_t lo, uint64_t hi) {
  const auto& t = *r.main;
  uint64_t post_end = lo;
  for (const auto& s : t.spans) {
    if (s.start < lo || s.start > hi) continue;
    if ((is_net(s) || is_d2h(s)) && s.end <= hi) post_end = std::max(post_end, s.end);
  }
  uint64_t c1 = hi;
  for (const auto& s : t.spans) {
    if (s.start >= post_end && s.start <= hi && is_h2d(s)) {
      c1 = s.start;
      break;
    }
  }
  for (const auto& g : t.segs) {
    if (g.start < post_end) continue;
    if (g.start >= c1) break;
    if (is_blocked(g.state) && r.loaders.count(g.waker_tid)) return g.start;
  }
  return c1;
}

// Without executions (host_only): step k begins after the previous step's
// collective, at the first wait for a batch from a loader, or right after
// that collective when the batch was ready.
uint64_t find_host_boundary(const RankCtx& r, uint64_t lo, uint64_t hi) {
  for (const auto& g : r.main->segs) {
    if (g.start < lo) continue;
    if (g.start >= hi) break;
    if (is_blocked(g.state) && r.loaders.count(g.waker_tid)) return g.start;
  }
  return lo;
}

// Loaders' share of time on storage vs CPU during [s, e).
void split_data_wait(const RankCtx& r, uint64_t s, uint64_t e, uint64_t* io_ns, uint64_t* cpu_ns) {
  for (const auto* lt : r.loader_threads) {
    for (const auto& g : lt->segs) {
      if (g.end <= s) continue;
      if (g.start >= e) break;
      uint64_t ov = overlap(g.start, g.end, s, e);
      if (g.state == ThreadState::running) *cpu_ns += ov;
      else if (g.state == ThreadState::disk_wait) *io_ns += ov;
    }
    // O_DIRECT reads may sleep in S rather than D: count in-flight block I/O too.
    for (const auto& b : lt->block) {
      if (b.end <= s || b.start >= e || b.write) continue;
      *io_ns += overlap(b.start, b.end, s, e) / 2;  // half weight: avoid double counting a D-state wait
    }
  }
}

// Inside execution [a, b): the end of the last queue kick (the device starts
// then) and the poller's notice of completion (its first ioctl after the
// kicks - the acknowledgement - or the return).
std::pair<uint64_t, uint64_t> kick_end_and_notice(const ThreadTimeline& t, uint64_t a, uint64_t b) {
  uint64_t last_kick_end = a, notice = b;
  for (const auto& sp : t.spans)
    if (sp.start >= a && sp.end <= b && is_kick(sp)) last_kick_end = std::max(last_kick_end, sp.end);
  for (const auto& sp : t.spans)
    if (sp.kind == SpanKind::ioctl && sp.start >= last_kick_end && sp.start < b) {
      notice = sp.start;
      break;
    }
  return {last_kick_end, notice};
}

// The device finished somewhere between the poller's last look that found
// nothing (the end of its last slice on a CPU before the final wait for a
// CPU) and its notice: each execution bounds its device time (kick end to
// finish) from below and above. A steady job repeats the same executions,
// so the bounds of many executions close in on one device time: between
// the 90th percentile of the lower bounds and the 10th of the upper ones
// (robust to a few odd executions). 0 (unknown) with fewer than 3.
uint64_t estimate_device_ns(const ThreadTimeline& t, const std::vector<Anchor>& anchors) {
  std::vector<uint64_t> lo, hi, mid;
  for (const auto& an : anchors) {
    auto [k, n] = kick_end_and_notice(t, an.start, an.end);
    if (n <= k) continue;
    uint64_t last_look = k;  // the poller was on CPU right after the kicks
    for (const auto& g : t.segs) {
      if (g.start >= n) break;
      if (g.end <= k || g.state != ThreadState::running) continue;
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
  return l <= h ? l + (h - l) / 2 : median(mid);
}

// Runnable-but-not-running time is CPU contention, except while the runtime
// busy-polls for the device inside nrt_execute: there the device is working
// anyway and the wait does not lengthen the step. Exceptions inside the
// execution: waits inside its ioctls (submission and acknowledgement), and
// the wait during which the device finished: the last runnable stretch
// before the poller noticed completion - from the device's estimated
// finish (kick end + typical device time) when known, else all of it.
void paint_runnable(const ThreadTimeline& t, const StateSeg& g, const std::vector<std::pair<uint64_t, uint64_t>>& exec,
                    uint64_t typical_device_ns, std::vector<Paint>& paints) {
  constexpr int kPrio = 10;
  for (const auto& [a, b] : exec) {
    if (g.end <= a || g.start >= b) continue;
    if (g.start < a) paints.push_back({g.start, a, kPrio, Category::cpu_contention});
    if (g.end > b) paints.push_back({b, g.end, kPrio, Category::cpu_contention});
    uint64_t is = std::max(g.start, a), ie = std::min(g.end, b);
    auto [last_kick_end, notice] = kick_end_and_notice(t, a, b);
    bool completion_wait = false;
    if (is >= notice) {
      completion_wait = true;
    } else if (ie <= notice) {
      completion_wait = true;  // unless a later runnable stretch also ends before `notice`
      for (const auto& h : t.segs) {
        if (h.start <= g.start) continue;
        if (h.end > notice) break;
        if (h.state == ThreadState::runnable) {
          completion_wait = false;
          break;
        }
      }
    }
    if (completion_wait) {
      uint64_t from = is;
      if (typical_device_ns && is < notice)
        from = std::clamp(last_kick_end + typical_device_ns, is, std::min(ie, notice));
      if (ie > from) paints.push_back({from, ie, kPrio, Category::cpu_contention});
    } else {
      for (const auto& sp : t.spans)
        if (sp.kind == SpanKind::ioctl && sp.start < ie && sp.end > is)
          paints.push_back({std::max(sp.start, is), std::min(sp.end, ie), kPrio, Category::cpu_contention});
    }
    return;
  }
  paints.push_back({g.start, g.end, kPrio, Category::cpu_contention});
}

void attribute_step(RankCtx& r, StepResult& st) {
  const auto& t = *r.main;
  const uint64_t ws = st.start_ns, we = st.end_ns;
  std::vector<Paint> paints;
  std::vector<std::pair<uint64_t, uint64_t>> exec;
  if (!r.host_only)
    for (const auto& a : r.anchors)
      if (a.end > ws && a.start < we) exec.emplace_back(a.start, a.end);
  for (const auto& [a, b] : exec) paints.push_back({a, b, 8, Category::device_execute});

  // Host collective: clusters of send/recv calls not separated by device work.
  std::vector<const Span*> net;
  for (const auto& s : t.spans) {
    if (s.end <= ws || s.start >= we) continue;
    if (is_net(s)) net.push_back(&s);
    if (s.kind == SpanKind::ioctl) {
      auto c = neuron_cmd_class(s.cmd);
      // Completion acknowledgements inside an execution are part of waiting for
      // the device, not submission (descriptor writes and queue kicks are).
      bool ack_in_exec = false;
      if (is_ack(s))
        for (const auto& [a, b] : exec)
          if (s.start >= a && s.end <= b) ack_in_exec = true;
      if ((c == NEURON_CLASS_SUBMIT || c == NEURON_CLASS_SYNC) && !ack_in_exec)
        paints.push_back({s.start, s.end, 9, Category::dma_submission});
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
  // A collective is a run of send/recv calls; the time between them (poll
  // waits for a peer, reductions on the CPU) belongs to it unless device
  // work or input copies come in between. A readiness wait (poll, epoll,
  // select) that ends right before the first call is part of it too.
  auto other_work_between = [&](uint64_t a, uint64_t b) {
    for (const auto& [x, y] : exec)
      if (x < b && y > a) return true;
    for (const auto& sp : t.spans)
      if (sp.start < b && sp.end > a && is_h2d(sp)) return true;
    return false;
  };
  for (size_t i = 0; i < net.size();) {
    uint64_t cs = net[i]->start, ce = net[i]->end;
    size_t j = i + 1;
    while (j < net.size() && !other_work_between(ce, net[j]->start)) {
      ce = std::max(ce, net[j]->end);
      ++j;
    }
    for (const auto& g : t.segs) {
      if (g.end > cs) break;
      if (is_blocked(g.state) && cs - g.end < 2'000'000ull && is_readiness_wait(g.blocked_sys) && g.start >= ws)
        cs = g.start;
    }
    paints.push_back({cs, ce, 4, Category::collective});
    if (st.arrival_ns == 0) {
      st.arrival_ns = cs;
      st.host_collective = true;
    }
    i = j;
  }

  std::vector<std::pair<uint64_t, uint64_t>> data_waits;
  for (const auto& g : t.segs) {
    if (g.end <= ws) continue;
    if (g.start >= we) break;
    switch (g.state) {
      case ThreadState::running: paints.push_back({g.start, g.end, 2, Category::host_overhead}); break;
      case ThreadState::runnable: paint_runnable(t, g, exec, r.typical_device_ns, paints); break;
      case ThreadState::sleeping:
      case ThreadState::disk_wait:
        if (r.loaders.count(g.waker_tid)) {
          paints.push_back({g.start, g.end, 3, Category::data_loading});
          data_waits.emplace_back(std::max(g.start, ws), std::min(g.end, we));
        } else if (r.comm_threads.count(g.waker_tid)) {
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
      default: break;
    }
  }
  st.ns = paint_window(ws, we, paints);
  // Split data loading into storage and preprocessing by what the loaders did meanwhile.
  uint64_t io = 0, cpu = 0;
  for (const auto& [a, b] : data_waits) split_data_wait(r, a, b, &io, &cpu);
  uint64_t dl = st.ns[static_cast<size_t>(Category::data_loading)];
  if (io + cpu > 0) {
    st.data_storage_ns = static_cast<uint64_t>(static_cast<double>(dl) * static_cast<double>(io) /
                                               static_cast<double>(io + cpu));
    st.data_preprocess_ns = dl - st.data_storage_ns;
  } else {
    st.data_preprocess_ns = dl;
  }
  if (st.arrival_ns == 0 && !exec.empty()) st.arrival_ns = exec.front().first;
}

// A CPU-only job (no accelerator, no marker) - for example PyTorch DDP over
// gloo: once per step the gradients are all-reduced over TCP by the process's
// communication threads, in a few bursts (buckets, ring phases waiting for
// the peer). Calls less than 2 ms apart form a burst; the gaps between
// bursts fall into two populations, inside a step and between steps (see
// below for how the split is chosen). Setup traffic (rendezvous store, the parameter
// broadcast) happens before the first batch is requested, so traffic before
// the main thread first waits for a loader is left out (when it has
// loaders); step bursts far smaller than the typical one (store
// keep-alives, the final barrier) too.
std::vector<Anchor> collective_bursts(const TimelineStore& tl, uint32_t pid, const RankCtx& r) {
  uint64_t first_batch = 0;  // the first wait woken by a loader process
  for (const auto& g : r.main->segs)
    if (is_blocked(g.state) && g.waker_pid != pid && r.loaders.count(g.waker_tid)) {
      first_batch = g.start;
      break;
    }
  std::vector<const Span*> spans;
  for (const auto& [tid, t] : tl.threads()) {
    if (t.pid != pid) continue;
    for (const auto& s : t.spans)
      if (is_net(s) && s.start >= first_batch) spans.push_back(&s);
  }
  if (spans.size() < 8) return {};
  std::sort(spans.begin(), spans.end(), [](const Span* a, const Span* b) { return a->start < b->start; });
  auto group = [&](uint64_t split, std::vector<uint64_t>* bytes) {
    std::vector<Anchor> out;
    Anchor cur{spans.front()->start, spans.front()->end};
    uint64_t cur_bytes = 0;
    for (const Span* sp : spans) {
      if (sp->start > cur.end + split) {
        out.push_back(cur);
        bytes->push_back(cur_bytes);
        cur = {sp->start, sp->end};
        cur_bytes = 0;
      }
      cur.end = std::max(cur.end, sp->end);
      cur_bytes += sp->bytes;
    }
    out.push_back(cur);
    bytes->push_back(cur_bytes);
    return out;
  };
  // Every step all-reduces the same gradients: the right split makes the
  // groups' byte counts (nearly) equal. Try each gap length as the split and
  // keep the one whose groups vary least in bytes (coefficient of
  // variation; ties: more groups). Under load a peer's delay can stretch a
  // gap inside a step past the gaps between steps; such a split step shows
  // as two neighbouring groups whose bytes add up to one step: merged.
  std::vector<uint64_t> fine_bytes;
  auto fine = group(2'000'000, &fine_bytes);
  std::vector<uint64_t> cands = {2'000'000};
  for (size_t i = 1; i < fine.size(); ++i) cands.push_back(fine[i].start - fine[i - 1].end);
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  auto kept_of = [](const std::vector<uint64_t>& bytes) {
    uint64_t typical = median(bytes);
    std::vector<size_t> keep;
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] * 4 >= typical) keep.push_back(i);
    return keep;
  };
  double best_cv = 1e18;
  size_t best_n = 0;
  std::vector<Anchor> bursts;
  std::vector<uint64_t> bytes;
  for (uint64_t split : cands) {
    std::vector<uint64_t> b;
    auto g = group(split, &b);
    auto keep = kept_of(b);
    if (keep.size() < 3) break;  // larger splits only merge more
    double mean = 0, var = 0;
    for (size_t i : keep) mean += static_cast<double>(b[i]);
    mean /= static_cast<double>(keep.size());
    for (size_t i : keep) var += (static_cast<double>(b[i]) - mean) * (static_cast<double>(b[i]) - mean);
    double cv = mean > 0 ? std::sqrt(var / static_cast<double>(keep.size())) / mean : 1e18;
    if (cv < best_cv - 1e-3 || (cv < best_cv + 1e-3 && keep.size() > best_n)) {
      best_cv = cv;
      best_n = keep.size();
      bursts = std::move(g);
      bytes = std::move(b);
    }
  }
  if (bursts.empty()) return {};
  std::vector<Anchor> out;
  std::vector<uint64_t> out_bytes;
  for (size_t i : kept_of(bytes)) {
    out.push_back(bursts[i]);
    out_bytes.push_back(bytes[i]);
  }
  const double per_step = static_cast<double>(median(out_bytes));
  std::vector<Anchor> merged;
  for (size_t i = 0; i < out.size(); ++i) {
    Anchor a = out[i];
    double sum = static_cast<double>(out_bytes[i]);
    while (sum < 0.9 * per_step && i + 1 < out.size() &&
           sum + static_cast<double>(out_bytes[i + 1]) <= 1.1 * per_step) {
      sum += static_cast<double>(out_bytes[++i]);
      a.end = out[i].end;
    }
    merged.push_back(a);
  }
  return merged;
  return out;
}

// Loader workers: child processes of the rank and the rank's other threads
// (except those that move the collective's bytes).
void add_loaders(const TimelineStore& tl, RankCtx& r) {
  const uint32_t pid = r.res.pid;
  for (const auto& [tid, t] : tl.threads()) {
    bool child = tl.parent_of(t.pid) == pid;
    if ((t.pid == pid && tid != r.main->tid && !r.comm_threads.count(tid)) || child) {
      r.loaders.insert(tid);
      r.loader_threads.push_back(&t);
      r.res.loader_tids.push_back(tid);
      if (child && std::find(r.res.loader_pids.begin(), r.res.loader_pids.end(), t.pid) == r.res.loader_pids.end())
        r.res.loader_pids.push_back(t.pid);
    }
  }
}

// Ranks of a job with no accelerator and no marker: processes whose threads
// carry periodic collective traffic (not children of another such process:
// those would be its workers). The main thread is the process's first thread.
std::vector<RankCtx> host_only_ranks(const TimelineStore& tl, const ThreadTable& threads) {
  std::map<uint32_t, int> net_calls;
  for (const auto& [tid, t] : tl.threads())
    for (const auto& s : t.spans) net_calls[t.pid] += is_net(s);
  std::vector<RankCtx> out;
  for (const auto& [pid, n] : net_calls) {
    if (n < 8) continue;
    uint32_t parent = tl.parent_of(pid);
    if (parent && net_calls.count(parent) && net_calls[parent] >= 8) continue;
    const ThreadTimeline* main = tl.find(pid);
    if (!main || main->pid != pid) continue;
    RankCtx r;
    r.main = main;
    r.host_only = true;
    r.res.pid = pid;
    r.res.main_tid = pid;
    if (const auto* ti = threads.find(pid)) r.res.comm = ti->comm;
    for (const auto& [tid, t] : tl.threads()) {
      if (t.pid != pid || tid == pid) continue;
      int calls = 0;
      for (const auto& s : t.spans) calls += is_net(s);
      if (calls >= 2) r.comm_threads.insert(tid);
    }
    add_loaders(tl, r);
    r.anchors = collective_bursts(tl, pid, r);
    if (r.anchors.size() < 2) continue;
    r.res.source = StepSource::automatic_host;
    out.push_back(std::move(r));
  }
  return out;
}

void build_steps(RankCtx& r) {
  const auto& t = *r.main;
  std::vector<uint64_t> bounds;
  uint64_t thread_end = t.segs.empty() ? 0 : t.segs.back().end;
  if (!t.spans.empty()) thread_end = std::max(thread_end, t.spans.back().end);
  uint64_t thread_start = t.segs.empty() ? 0 : t.segs.front().start;

  if (r.res.source == StepSource::marker) {
    bounds = t.markers;
  } else {
    const auto& A = r.anchors;
    if (A.empty()) return;
    std::vector<uint64_t> periods;
    for (size_t k = 1; k < A.size(); ++k) periods.push_back(A[k].start - A[k - 1].start);
    uint64_t period = median(periods);
    for (size_t k = 0; k < A.size(); ++k) {
      // Step 0 of a CPU-only job begins at its first wait for a batch (the
      // loaders' start-up): there is no execution to bound it.
      uint64_t lo = k                 ? A[k - 1].end
                    : r.host_only     ? 0
                    : (period && A[0].start > 2 * period ? A[0].start - 2 * period : 0);
      lo = std::max(lo, thread_start);
      bounds.push_back(r.host_only ? find_host_boundary(r, lo, A[k].start) : find_boundary(r, lo, A[k].start));
    }
  }
  if (bounds.empty()) return;
  // The last step ends after its tail: the typical time from execution end
  // (or marker) to the next boundary, clamped to what the thread did.
  std::vector<uint64_t> tails;
  uint64_t last_end;
  if (r.res.source == StepSource::marker) {
    // Each marker opens a step; the time after the last marker is a step only
    // if the thread kept working for most of a typical period (a final
    // marker call that closes the loop opens nothing).
    for (size_t k = 1; k < bounds.size(); ++k) tails.push_back(bounds[k] - bounds[k - 1]);
    uint64_t period = median(tails);
    last_end = bounds.back() + period;
    if (thread_end && thread_end < bounds.back() + period / 2) last_end = bounds.back();
  } else {
    const auto& A = r.anchors;
    for (size_t k = 1; k < A.size(); ++k)
      if (bounds[k] > A[k - 1].end) tails.push_back(bounds[k] - A[k - 1].end);
    last_end = A.back().end + median(tails);
  }
  if (thread_end && last_end > thread_end) last_end = thread_end;
  if (last_end > bounds.back()) bounds.push_back(last_end);
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    if (bounds[k + 1] <= bounds[k]) continue;
    StepResult st;
    st.index = static_cast<int>(r.res.steps.size());
    st.start_ns = bounds[k];
    st.end_ns = bounds[k + 1];
    r.res.steps.push_back(st);
  }
}

// A device-side collective (inside the execution) makes every rank leave
// nrt_execute together; a rank that entered earlier spent the difference
// waiting for the others. Without device counters (NDS) that arrival skew is
// the best kernel-side estimate of device collective wait.
void apply_device_skew(std::vector<RankCtx>& ranks) {
  if (ranks.size() < 2) return;
  size_t n = kInf;
  for (const auto& r : ranks) n = std::min(n, r.anchors.size());
  for (size_t k = 0; k < n; ++k) {
    uint64_t max_entry = 0, min_exit = kInf, max_exit = 0;
    for (const auto& r : ranks) {
      max_entry = std::max(max_entry, r.anchors[k].start);
      min_exit = std::min(min_exit, r.anchors[k].end);
      max_exit = std::max(max_exit, r.anchors[k].end);
    }
    uint64_t span = max_exit - min_exit;
    uint64_t typical = ranks[0].anchors[k].end - ranks[0].anchors[k].start;
    if (span > 2'000'000ull && span > typical / 10) continue;  // exits not synchronised: no device collective
    for (auto& r : ranks) {
      const auto& a = r.anchors[k];
      uint64_t wait = max_entry > a.start ? std::min(max_entry - a.start, a.end - a.start) : 0;
      if (wait < 200'000) continue;
      for (auto& st : r.res.steps) {
        if (a.start < st.start_ns || a.start >= st.end_ns) continue;
        auto& de = st.ns[static_cast<size_t>(Category::device_execute)];
        uint64_t moved = std::min(wait, de);
        de -= moved;
        st.ns[static_cast<size_t>(Category::collective)] += moved;
      }
    }
  }
}

void cross_rank(std::vector<RankCtx>& ranks, int skip) {
  if (ranks.size() < 2) return;
  size_t n = kInf;
  for (const auto& r : ranks) n = std::min(n, r.res.steps.size());
  std::vector<uint64_t> durs;
  for (const auto& r : ranks)
    for (const auto& s : r.res.steps) durs.push_back(s.duration());
  uint64_t typical = median(durs);
  for (size_t k = 0; k < n; ++k) {
    uint64_t first = kInf, last = 0;
    size_t last_rank = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      uint64_t a = ranks[i].res.steps[k].arrival_ns;
      if (!a) continue;
      first = std::min(first, a);
      if (a > last) {
        last = a;
        last_rank = i;
      }
    }
    if (first == kInf) continue;
    for (auto& r : ranks) {
      auto& st = r.res.steps[k];
      st.late_ns = st.arrival_ns > first ? st.arrival_ns - first : 0;
    }
    // A late rank only holds the others back where a collective couples
    // them: a host collective in this step on every rank, or executions
    // that all end together (a device collective). Uncoupled ranks drift
    // apart freely; naming one of them a straggler would mislead.
    const uint64_t tolerance = std::max<uint64_t>(1'000'000ull, typical / 20);
    bool coupled = true;
    for (const auto& r : ranks) coupled = coupled && r.res.steps[k].host_collective;
    if (!coupled) {
      uint64_t min_end = kInf, max_end = 0;
      bool all = true;
      for (const auto& r : ranks) {
        const auto& st = r.res.steps[k];
        const Anchor* an = nullptr;
        for (const auto& a : r.anchors)
          if (a.start >= st.start_ns && a.start < st.end_ns) {
            an = &a;
            break;
          }
        if (!an) {
          all = false;
          break;
        }
        min_end = std::min(min_end, an->end);
        max_end = std::max(max_end, an->end);
      }
      coupled = all && max_end - min_end <= tolerance;
    }
    if (coupled && static_cast<int>(k) >= skip && last - first > tolerance) ++ranks[last_rank].res.straggler_steps;
  }
}

}  // namespace

JobAnalysis analyze_job(const TimelineStore& tl, const ThreadTable& threads, const DropStats& drops,
                        const AnalysisOptions& opt) {
  JobAnalysis job;
  job.skipped_warmup_steps = opt.skip_warmup_steps;

  // Ranks: processes whose threads drive the accelerator (or mark steps).
  std::map<uint32_t, const ThreadTimeline*> best;  // pid -> main thread
  std::map<uint32_t, uint64_t> best_score;
  for (const auto& [tid, t] : tl.threads()) {
    uint64_t execs = 0, kicks = 0, ioctls = 0;
    for (const auto& s : t.spans) {
      execs += s.kind == SpanKind::nrt_execute;
      kicks += is_kick(s);
      ioctls += s.kind == SpanKind::ioctl;
    }
    // 64 bits: an int overflowed past 2147 executions on one thread (about two
    // minutes of a busy job) and the rank vanished. This cannot overflow before
    // 1.8e13 executions.
    const uint64_t score = execs * 1'000'000 + t.markers.size() * 10'000 + kicks * 100 + ioctls;
    if (score == 0) continue;
    if (score > best_score[t.pid]) {
      best_score[t.pid] = score;
      best[t.pid] = &t;
    }
  }
  std::vector<RankCtx> ranks;
  for (const auto& [pid, main] : best) {
    RankCtx r;
    r.main = main;
    r.res.pid = pid;
    r.res.main_tid = main->tid;
    if (const auto* ti = threads.find(main->tid)) r.res.comm = ti->comm;
    int execs = 0, kicks = 0;
    for (const auto& s : main->spans) {
      if (s.kind == SpanKind::nrt_execute) {
        ++execs;
        r.anchors.push_back({s.start, s.end});
      }
      kicks += is_kick(s);
    }
    if (execs >= 2) {
      r.res.source = StepSource::runtime_probes;
    } else if (main->markers.size() >= 2) {
      r.res.source = StepSource::marker;
      r.anchors.clear();
    } else if (kicks >= 2) {
      r.res.source = StepSource::automatic;
      r.anchors = anchors_from_ioctls(*main);
    } else {
      continue;  // used the device, but not in steps (setup tools, monitors)
    }
    add_loaders(tl, r);
    ranks.push_back(std::move(r));
  }
  if (ranks.empty()) ranks = host_only_ranks(tl, threads);
  std::sort(ranks.begin(), ranks.end(), [](const RankCtx& a, const RankCtx& b) { return a.res.pid < b.res.pid; });
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i].res.rank = static_cast<int>(i);

  for (auto& r : ranks) {
    r.typical_device_ns = estimate_device_ns(*r.main, r.anchors);
    build_steps(r);
    for (auto& st : r.res.steps) attribute_step(r, st);
  }
  {
    // Device counters (NDS) split device execute into compute and collective;
    // without them, the cross-rank arrival skew is the estimate.
    std::vector<RankResult*> rr;
    for (auto& r : ranks) rr.push_back(&r.res);
    if (!signals::apply_device_signals(rr, tl, threads, opt.device_signals, opt.skip_warmup_steps, &job.signals))
      apply_device_skew(ranks);
  }
  cross_rank(ranks, opt.skip_warmup_steps);
  {
    std::vector<RankResult*> rr;
    for (auto& r : ranks) rr.push_back(&r.res);
    job.fabric = summarize_fabric(tl, rr, opt.skip_warmup_steps);
  }

  // Shares over counted steps; per-step gating.
  std::array<uint64_t, kCategories> sum{};
  uint64_t total = 0;
  for (auto& r : ranks) {
    for (auto& st : r.res.steps) {
      size_t g = 0;
      for (size_t c = 1; c < kCategories; ++c)
        if (st.ns[c] > st.ns[g]) g = c;
      st.gating = static_cast<Category>(g);
      if (st.index < opt.skip_warmup_steps) continue;
      for (size_t c = 0; c < kCategories; ++c) {
        r.res.total[c] += st.ns[c];
        sum[c] += st.ns[c];
      }
      r.res.counted_ns += st.duration();
      total += st.duration();
    }
  }
  for (size_t c = 0; c < kCategories; ++c)
    job.mean_share[c] = total ? static_cast<double>(sum[c]) / static_cast<double>(total) : 0;
  for (auto& r : ranks) job.ranks.push_back(std::move(r.res));
  job.verdict = decide_verdict(job, tl, drops);
  signals::annotate_verdict(job);
  return job;
}

}  // namespace steptrace
