// SPDX-License-Identifier: Apache-2.0
#include "steps/ranks.h"

#include <algorithm>
#include <map>

#include "steps/anchors.h"
#include "steps/collective_in_flight.h"
#include "steps/span_classes.h"

namespace steptrace::steps {

void add_loaders(const TimelineStore& tl, RankSteps& r) {
  const uint32_t pid = r.pid;
  for (const auto& [key, t] : tl.threads()) {
    const uint32_t tid = t.tid;
    bool child = tl.parent_of(t.pid) == pid;
    if ((t.pid == pid && tid != r.main->tid && !r.comm_threads.count(tid)) || child) {
      r.loaders.insert(tid);
      r.loader_threads.push_back(&t);
      r.loader_tids.push_back(tid);
      if (child && std::find(r.loader_pids.begin(), r.loader_pids.end(), t.pid) == r.loader_pids.end())
        r.loader_pids.push_back(t.pid);
    }
  }
}

std::vector<RankSteps> accelerator_ranks(const TimelineStore& tl, const ThreadTable& threads) {
  // Each process's main thread: the one that drives the accelerator (or marks steps) most.
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
  std::vector<RankSteps> ranks;
  for (const auto& [pid, main] : best) {
    RankSteps r;
    r.main = main;
    r.pid = pid;
    r.main_tid = main->tid;
    if (const auto* ti = threads.find(main->tid)) r.comm = ti->comm;
    uint64_t execs = 0, kicks = 0;
    for (const auto& s : main->spans) {
      if (s.kind == SpanKind::nrt_execute) {
        ++execs;
        r.anchors.push_back({s.start, s.end});
      }
      kicks += is_kick(s);
    }
    if (execs >= 2) {
      r.source = StepSource::runtime_probes;
    } else if (main->markers.size() >= 2) {
      r.source = StepSource::marker;
      r.anchors.clear();
    } else if (kicks >= 2) {
      r.source = StepSource::automatic;
      r.anchors = anchors_from_ioctls(*main);
    } else {
      continue;  // used the device, but not in steps (setup tools, monitors)
    }
    add_loaders(tl, r);
    ranks.push_back(std::move(r));
  }
  return ranks;
}

// Ranks of a job with no accelerator and no marker: processes whose threads
// carry periodic collective traffic (not children of another such process:
// those would be its workers). The main thread is the process's first thread.
std::vector<RankSteps> host_only_ranks(const TimelineStore& tl, const ThreadTable& threads,
                                       const std::map<uint32_t, BurstModel>& known) {
  std::map<uint32_t, int> net_calls;
  for (const auto& [tid, t] : tl.threads())
    for (const auto& s : t.spans) net_calls[t.pid] += is_net(s);
  std::vector<RankSteps> out;
  for (const auto& [pid, n] : net_calls) {
    if (n < 8) continue;
    uint32_t parent = tl.parent_of(pid);
    if (parent && net_calls.count(parent) && net_calls[parent] >= 8) continue;
    const ThreadTimeline* main = tl.find(pid);
    if (!main || main->pid != pid) continue;
    RankSteps r;
    r.main = main;
    r.host_only = true;
    r.pid = pid;
    r.main_tid = pid;
    if (const auto* ti = threads.find(pid)) r.comm = ti->comm;
    for (const auto& [key, t] : tl.threads()) {
      const uint32_t tid = t.tid;
      if (t.pid != pid || key == pid) continue;  // the main thread (its live entry)
      int calls = 0;
      for (const auto& s : t.spans) calls += is_net(s);
      if (calls >= 2) r.comm_threads.insert(tid);
    }
    add_loaders(tl, r);
    const auto k = known.find(pid);
    r.anchors = collective_bursts(tl, r, k != known.end() ? &k->second : nullptr);
    if (r.anchors.size() < 2) continue;
    r.source = StepSource::automatic_host;
    r.in_flight = collective_in_flight(tl, r);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace steptrace::steps
