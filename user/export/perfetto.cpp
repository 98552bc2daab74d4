// SPDX-License-Identifier: Apache-2.0
#include "export/perfetto.h"

#include "attribution/host_steals.h"
#include "export/profile_view.h"
#include "export/provenance.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>

#include "decode/neuron_cmd.h"
#include "decode/rdma_verb.h"
#include "export/report_stats.h"

namespace steptrace {
namespace {

using nlohmann::json;

const char* span_name(SpanKind k) {
  switch (k) {
    case SpanKind::ioctl: return "ioctl";
    case SpanKind::net_send: return "tcp send";
    case SpanKind::net_recv: return "tcp recv";
    case SpanKind::nrt_execute: return "nrt_execute";
    case SpanKind::nrt_tensor_write: return "nrt_tensor_write";
    case SpanKind::nrt_tensor_read: return "nrt_tensor_read";
    case SpanKind::rdma_verb: return "uverbs";
  }
  return "call";
}

// One trace being written: the event list and the report's time origin.
struct TraceWriter {
  const SessionReport& r;
  const PerfettoOptions& opt;
  json ev = json::array();
  size_t dropped_slices = 0;
  uint64_t async_id = 1;
  uint64_t flow_ids = 0;
  std::set<uint32_t> main_tids;  // the ranks' main threads: where wakeup arrows end

  double us(uint64_t ns) const {
    return ns > r.window_start_ns ? static_cast<double>(ns - r.window_start_ns) / 1e3 : 0.0;
  }
  static double dur_us(uint64_t a, uint64_t b) { return b > a ? static_cast<double>(b - a) / 1e3 : 0.0; }

  // Which process is which: ranks, their loaders, everything else. Returns the pids named.
  std::set<uint32_t> process_names() {
    const auto& job = r.job;
    std::map<uint32_t, std::string> proc_name;
    std::map<uint32_t, int> proc_sort;
    for (const auto& rk : job.ranks) {
      proc_name[rk.pid] = fmt::format("rank {}: {} {}{}", rk.rank, rk.comm, rk.pid,
                                      rk.rank == job.verdict.straggler_rank ? " (straggler)" : "");
      proc_sort[rk.pid] = rk.rank * 2;
      for (uint32_t lp : rk.loader_pids) {
        if (proc_name.count(lp)) continue;
        proc_name[lp] = fmt::format("rank {} loader {}", rk.rank, lp);
        proc_sort[lp] = rk.rank * 2 + 1;
      }
    }
    std::set<uint32_t> pids;
    for (const auto& [tid, t] : r.analysis.timeline.threads()) pids.insert(t.pid);
    for (const auto& rk : job.ranks) pids.insert(rk.pid);
    for (uint32_t pid : pids) {
      std::string name = proc_name.count(pid) ? proc_name[pid] : "";
      if (name.empty()) {
        const auto* ti = r.analysis.threads.find(pid);
        name = fmt::format("{} {}", ti && !ti->comm.empty() ? ti->comm : "process", pid);
      }
      ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
      int sort = proc_sort.count(pid) ? proc_sort[pid] : 1000 + static_cast<int>(pid % 100000);
      ev.push_back(
          {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", sort}}}});
    }
    return pids;
  }

  // Steps: one track per rank.
  void step_tracks() {
    const auto& job = r.job;
    for (const auto& rk : job.ranks) {
      const uint64_t tid = kStepsTrackTid + static_cast<uint64_t>(rk.rank);
      ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rk.pid}, {"tid", tid},
                    {"args", {{"name", fmt::format("steps (rank {})", rk.rank)}}}});
      ev.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rk.pid}, {"tid", tid},
                    {"args", {{"sort_index", -1}}}});
      for (const auto& st : rk.steps) {
        json args = json::object();
        for (size_t c = 0; c < kCategories; ++c)
          args[std::string(kCategoryNames[c]) + "_ms"] = static_cast<double>(st.ns[c]) / 1e6;
        args["duration_ms"] = static_cast<double>(st.duration()) / 1e6;
        args["gating"] = std::string(category_name(st.gating));
        args["late_ms"] = static_cast<double>(st.late_ns) / 1e6;
        args["copy_bytes"] = st.copy_bytes;
        // What the host took (attribution/host_steals.h), where it took any.
        for (const auto& [name, ns] : {std::pair<const char*, uint64_t>{"throttled_ms", st.throttled_ns},
                                       {"loaders_throttled_ms", st.data_throttled_ns},
                                       {"loaders_reclaim_ms", st.data_reclaim_ns},
                                       {"reclaim_ms", st.reclaim_ns},
                                       {"irq_ms", st.irq_ns},
                                       {"softirq_ms", st.softirq_ns}})
          if (ns) args[name] = static_cast<double>(ns) / 1e6;
        args["warmup"] = st.index < job.skipped_warmup_steps;
        ev.push_back({{"ph", "X"}, {"name", fmt::format("step {}", st.index)}, {"cat", "step"}, {"pid", rk.pid},
                      {"tid", tid}, {"ts", us(st.start_ns)}, {"dur", dur_us(st.start_ns, st.end_ns)},
                      {"args", args}});
      }
    }
  }

  void state_slices(const ThreadTimeline& t) {
    for (const auto& s : t.segs) {
      if (s.state == ThreadState::unknown || s.state == ThreadState::dead || s.end <= s.start) continue;
      if (ev.size() >= opt.max_events) {
        ++dropped_slices;
        continue;
      }
      const std::string name =
          s.throttled ? std::string(state_name(s.state)) + " (cpu quota)" : std::string(state_name(s.state));
      json e = {{"ph", "X"}, {"name", name}, {"cat", "sched"}, {"pid", t.pid}, {"tid", t.tid},
                {"ts", us(s.start)}, {"dur", dur_us(s.start, s.end)}};
      if (s.waker_tid) e["args"] = {{"woken_by_tid", s.waker_tid}, {"woken_by_pid", s.waker_pid}};
      if (s.preempted_by) e["args"] = {{"preempted_by_tid", s.preempted_by}};
      ev.push_back(std::move(e));
      if (s.waker_tid) wake_flow(t, s);
    }
  }

  // An arrow from the waker to a rank's main thread where it was woken: the
  // critical path across threads (a loader handing over a batch, a comm
  // thread finishing the collective). Only wakers with a track of their own.
  void wake_flow(const ThreadTimeline& t, const StateSeg& s) {
    if (!main_tids.count(t.tid) || !r.analysis.timeline.find(s.waker_tid) || ev.size() + 2 > opt.max_events) return;
    const uint64_t id = ++flow_ids;
    ev.push_back({{"ph", "s"}, {"name", "wakeup"}, {"cat", "wakeup"}, {"id", id}, {"pid", s.waker_pid},
                  {"tid", s.waker_tid}, {"ts", us(s.start)}});
    ev.push_back({{"ph", "f"}, {"bp", "e"}, {"name", "wakeup"}, {"cat", "wakeup"}, {"id", id}, {"pid", t.pid},
                  {"tid", t.tid}, {"ts", us(s.start)}});
  }

  void call_slices(const ThreadTimeline& t, const std::string& comm) {
    if (t.spans.empty()) return;
    const auto& tl = r.analysis.timeline;
    const uint64_t ctid = kCallsTrackTid + t.tid;
    ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", t.pid}, {"tid", ctid},
                  {"args", {{"name", fmt::format("{} {} calls", comm, t.tid)}}}});
    // Start order, longer first, so enclosing calls precede what they contain.
    std::vector<const Span*> sp;
    for (const auto& s : t.spans) sp.push_back(&s);
    std::sort(sp.begin(), sp.end(), [](auto* a, auto* b) {
      return a->start != b->start ? a->start < b->start : a->end > b->end;
    });
    for (const auto* s : sp) {
      if (s->end < s->start) continue;
      std::string name = span_name(s->kind);
      json args = json::object();
      if (s->kind == SpanKind::ioctl) {
        name = std::string(neuron_cmd_name(s->cmd));
        args["cmd"] = s->cmd;
        args["ret"] = s->ret;
      } else if (s->kind == SpanKind::rdma_verb) {
        VerbInfo v = rdma_verb_info(s->cmd >> 16, s->cmd & 0xffff, s->flags);
        name = "uverbs " + v.name;
        args["group"] = std::string(verb_group_name(v.group));
        args["ret"] = s->ret;
      }
      if (s->bytes) args["bytes"] = s->bytes;
      if (s->sock_id) {
        auto it = tl.sockets().find(s->sock_id);
        if (it != tl.sockets().end()) args["socket"] = format_tuple(it->second);
      }
      const char* cat = s->kind == SpanKind::ioctl                                       ? "ioctl"
                        : (s->kind == SpanKind::net_send || s->kind == SpanKind::net_recv) ? "net"
                        : s->kind == SpanKind::rdma_verb                                   ? "efa_control"
                                                                                           : "runtime";
      ev.push_back({{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", t.pid}, {"tid", ctid},
                    {"ts", us(s->start)}, {"dur", dur_us(s->start, s->end)}, {"args", args}});
    }
  }

  void disk_requests(const ThreadTimeline& t) {
    for (const auto& b : t.block) {
      if (b.end < b.start) continue;
      std::string name = fmt::format("disk {} {}", b.write ? "write" : "read", format_dev(b.dev));
      json args = {{"bytes", b.bytes}, {"tid", t.tid}};
      ev.push_back({{"ph", "b"}, {"name", name}, {"cat", "disk"}, {"id", async_id}, {"pid", t.pid},
                    {"tid", t.tid}, {"ts", us(b.start)}, {"args", args}});
      ev.push_back({{"ph", "e"}, {"name", name}, {"cat", "disk"}, {"id", async_id}, {"pid", t.pid},
                    {"tid", t.tid}, {"ts", us(b.end)}});
      ++async_id;
    }
  }

  // What the host took from the thread: reclaim passes, and the interrupt
  // time of each slice that lost 20 us or more (a timer tick takes a few).
  void host_steals(const ThreadTimeline& t) {
    for (const auto& h : t.steals) {
      if (h.end < h.start || ev.size() + 2 > opt.max_events) continue;
      const bool reclaim = h.kind == ST_STEAL_DIRECT_RECLAIM || h.kind == ST_STEAL_MEMCG_RECLAIM;
      if (!reclaim && h.ns < 20'000) continue;
      std::string name = h.kind == ST_STEAL_DIRECT_RECLAIM ? "direct reclaim"
                         : h.kind == ST_STEAL_MEMCG_RECLAIM ? "memcg reclaim"
                         : h.kind == ST_STEAL_IRQ           ? "hardirq"
                                                            : "softirq " + softirq_vec_names(h.detail);
      json args = {{"tid", t.tid}, {reclaim ? "pages" : "handlers", h.count}};
      if (!reclaim) args["stolen_us"] = static_cast<double>(h.ns) / 1e3;
      ev.push_back({{"ph", "b"}, {"name", name}, {"cat", "host_steal"}, {"id", async_id}, {"pid", t.pid},
                    {"tid", t.tid}, {"ts", us(h.start)}, {"args", args}});
      ev.push_back({{"ph", "e"}, {"name", name}, {"cat", "host_steal"}, {"id", async_id}, {"pid", t.pid},
                    {"tid", t.tid}, {"ts", us(h.end)}});
      ++async_id;
    }
  }

  // On-CPU stack samples as instants on their thread: the leaf frame as the
  // name, the category and the stack (root first) as arguments.
  void cpu_samples() {
    const auto& v = r.analysis.samples.samples();
    const auto& cls = r.job.profile.samples;
    if (cls.size() != v.size()) return;  // not the analysis these samples were classified in
    const SampleStore& st = r.analysis.samples;
    for (size_t i = 0; i < v.size() && ev.size() < opt.max_events; ++i) {
      if (v[i].stack >= st.stacks().size()) continue;
      const SampledStack& s = st.stacks()[v[i].stack];
      const std::vector<std::string> frames = stack_frames(st, s);
      std::string stack;
      for (const auto& f : frames) stack += (stack.empty() ? "" : ";") + f;
      const std::string& leaf = frames.back();
      ev.push_back({{"ph", "i"}, {"s", "t"}, {"name", leaf}, {"cat", "cpu_sample"}, {"pid", v[i].pid},
                    {"tid", v[i].tid}, {"ts", us(v[i].ts)},
                    {"args", {{"category", std::string(category_name(cls[i].category))},
                              {"role", sample_role_name(cls[i].role)}, {"stack", stack}}}});
    }
  }

  // Threads: names, state slices, call slices, disk requests.
  void thread_tracks() {
    std::vector<const ThreadTimeline*> tls;
    for (const auto& [tid, t] : r.analysis.timeline.threads()) tls.push_back(&t);
    std::sort(tls.begin(), tls.end(), [](auto* a, auto* b) { return a->tid < b->tid; });
    for (const auto* t : tls) {
      const auto* ti = r.analysis.threads.find(t->tid);
      std::string comm = ti && !ti->comm.empty() ? ti->comm : fmt::format("thread {}", t->tid);
      ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", t->pid}, {"tid", t->tid},
                    {"args", {{"name", fmt::format("{} {}", comm, t->tid)}}}});
      state_slices(*t);
      call_slices(*t, comm);
      disk_requests(*t);
      host_steals(*t);
    }
    cpu_samples();
  }

  // Counters: what the kernel emitted and dropped per class (known per window).
  void drop_counters(const std::set<uint32_t>& pids) {
    const auto& job = r.job;
    const uint32_t cpid = job.ranks.empty() ? (pids.empty() ? 0 : *pids.begin()) : job.ranks.front().pid;
    json zero = json::object(), emitted = json::object(), dropped = json::object();
    for (int k = 1; k < ST_EV_KIND_MAX; ++k) {
      if (r.drops.emitted[k] == 0 && r.drops.dropped[k] == 0) continue;
      std::string n(kind_name(static_cast<uint32_t>(k)));
      zero[n] = 0;
      emitted[n] = r.drops.emitted[k];
      dropped[n] = r.drops.dropped[k];
    }
    const double end_us = us(r.window_end_ns);
    ev.push_back({{"ph", "C"}, {"name", "events dropped"}, {"pid", cpid}, {"tid", 0}, {"ts", 0.0}, {"args", zero}});
    ev.push_back({{"ph", "C"}, {"name", "events dropped"}, {"pid", cpid}, {"tid", 0}, {"ts", end_us}, {"args", dropped}});
    ev.push_back({{"ph", "C"}, {"name", "events emitted"}, {"pid", cpid}, {"tid", 0}, {"ts", 0.0}, {"args", zero}});
    ev.push_back({{"ph", "C"}, {"name", "events emitted"}, {"pid", cpid}, {"tid", 0}, {"ts", end_us}, {"args", emitted}});
  }
};

}  // namespace

json perfetto_trace(const SessionReport& r, const PerfettoOptions& opt) {
  TraceWriter w{r, opt};
  for (const auto& rk : r.job.ranks) w.main_tids.insert(rk.main_tid);
  auto pids = w.process_names();
  w.step_tracks();
  w.thread_tracks();
  w.drop_counters(pids);
  const auto& job = r.job;
  json meta = {{"schema", "steptrace.perfetto/1"},
               // ts 0 is window_start_ns (CLOCK_MONOTONIC); the source's t0_wall_clock lines it up with other traces.
               {"source", provenance_json(r)},
               {"wake_flows", w.flow_ids},
               {"verdict", job.verdict.headline},
               {"verdict_category", std::string(category_name(job.verdict.category))},
               {"straggler_rank", job.verdict.straggler_rank},
               {"incomplete", r.incomplete()},
               {"capture_end", r.capture_end},
               {"records", r.records},
               {"window_start_ns", r.window_start_ns},
               {"window_end_ns", r.window_end_ns},
               {"slices_left_out", w.dropped_slices}};
  return {{"traceEvents", std::move(w.ev)}, {"displayTimeUnit", "ms"}, {"metadata", meta}};
}

}  // namespace steptrace
