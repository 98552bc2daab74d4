// SPDX-License-Identifier: Apache-2.0
#include "attribution/device_signal_pass.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>

#include "attribution/device_signal_summary.h"
#include "attribution/network_bound.h"
#include "util/intervals.h"
#include "timeline/timeline_ranges.h"

namespace steptrace {

using signals::DeviceSignalsSummary;
using signals::NdsSample;
using signals::SignalsData;
using signals::SignalSource;

namespace {

using Execs = std::vector<std::pair<uint64_t, uint64_t>>;

bool proxy_name(const std::string& comm) {
  std::string c = comm;
  for (auto& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return c.find("proxy") != std::string::npos || c.rfind("nccl", 0) == 0 || c.rfind("nccom", 0) == 0;
}

StepResult* step_at(RankResult& r, uint64_t t) {
  for (auto& st : r.steps)
    if (t >= st.start_ns && t < st.end_ns) return &st;
  return nullptr;
}

// Which signals were sampled, and why not.
void describe_sources(const SignalsData* d, DeviceSignalsSummary& S) {
  if (!d) {
    S.nds.detail = S.efa.detail = S.neuron_sysfs.detail = "not sampled (replay of a capture, or disabled)";
    S.proxy.detail = "no proxy threads identified";
    return;
  }
  S.nds.available = !d->pid_device.empty();
  S.nds.detail = S.nds.available ? fmt::format("datastore of {} process(es) on {}", d->pid_device.size(),
                                               d->cfg.dev_root)
                                 : (d->nds_problem.empty() ? "no traced process has a datastore" : d->nds_problem);
  S.efa.available = !d->efa_ports.empty() && !d->efa.empty();
  S.efa.detail = S.efa.available ? fmt::format("{} adapter(s) under {}/class/infiniband", d->efa_ports.size(),
                                               d->cfg.sysfs_root)
                                 : fmt::format("no EFA adapter under {}/class/infiniband", d->cfg.sysfs_root);
  S.neuron_sysfs.available = !d->sysfs.empty();
  S.neuron_sysfs.detail = S.neuron_sysfs.available
                              ? fmt::format("{}/devices/virtual/neuron_device", d->cfg.sysfs_root)
                              : fmt::format("no neuron metrics under {}/devices/virtual/neuron_device",
                                            d->cfg.sysfs_root);
  if (d->samples_dropped) {
    // The cap kept memory bounded: the steps after it lack device samples.
    std::string note = fmt::format("; {} samples over the {}-per-kind cap were not kept (later steps lack them)",
                                   d->samples_dropped, d->cfg.max_samples);
    for (SignalSource* src : {&S.nds, &S.efa, &S.neuron_sysfs}) src->detail += note;
  }
}

// ---------------------------------------------------------------- NDS

// The runtime writes the record after it sees completion and before
// nrt_execute returns (the acknowledgement in between can take milliseconds).
constexpr uint64_t kSlack = 2'000'000;

// The NC this rank executes on: the one with the most samples (-1 none).
int busiest_nc(const SignalsData& d, uint32_t pid) {
  std::map<int, int> per_nc;
  for (const auto& s : d.nds)
    if (s.pid == pid) ++per_nc[s.nc];
  int nc = -1, best = 0;
  for (const auto& [n, c] : per_nc)
    if (c > best) {
      best = c;
      nc = n;
    }
  return nc;
}

// Which execution a one-execution sample describes: one that started before
// the sample and had not returned before the previous one. Where exactly one
// execution qualifies, (execution count - its index) gives the offset between
// the datastore's count and our executions; with that, every sample maps by
// its count, so a lost or late sample shifts nothing. The offset most
// samples vote for; nullopt when no sample is unambiguous.
std::optional<int64_t> nds_count_offset(const SignalsData& d, uint32_t pid, int nc, const Execs& anchors) {
  auto candidates = [&](const NdsSample& s, size_t* first) {
    int n = 0;
    for (size_t i = 0; i < anchors.size(); ++i) {
      if (anchors[i].first >= s.seen_ns) break;
      if (anchors[i].second + kSlack <= s.prev_ns) continue;
      if (n++ == 0) *first = i;
    }
    return n;
  };
  std::map<int64_t, int> offset_votes;
  for (const auto& s : d.nds) {
    if (s.pid != pid || s.nc != nc || s.delta != 1) continue;
    size_t i = 0;
    if (candidates(s, &i) == 1)
      ++offset_votes[static_cast<int64_t>(s.snap.inference_count) - static_cast<int64_t>(i)];
  }
  std::optional<int64_t> offset;
  int votes = 0;
  for (const auto& [o, v] : offset_votes)
    if (v > votes) votes = v, offset = o;
  return offset;
}

// The step a one-execution sample belongs to (null: none, or not known).
StepResult* nds_step(RankResult& r, const NdsSample& s, const Execs& anchors, std::optional<int64_t> offset) {
  StepResult* st = nullptr;
  if (offset) {
    int64_t i = static_cast<int64_t>(s.snap.inference_count) - *offset;
    if (i >= 0 && i < static_cast<int64_t>(anchors.size())) st = step_at(r, anchors[static_cast<size_t>(i)].first);
  } else {
    // No unambiguous sample: the earliest qualifying execution whose
    // step has no record yet.
    for (const auto& [a, b] : anchors) {
      if (a >= s.seen_ns) break;
      if (b + kSlack <= s.prev_ns) continue;
      StepResult* cand = step_at(r, a);
      if (cand && !cand->dev.nds) {
        st = cand;
        break;
      }
    }
  }
  if (anchors.empty() && s.prev_ns) st = step_at(r, s.prev_ns + (s.seen_ns - s.prev_ns) / 2);
  return st;
}

// NDS: one exact sample per execution -> its step; the device's own
// collective time leaves device execute. True when any step was split.
bool nds_to_steps(RankResult& r, const Execs& anchors, const SignalsData& d) {
  const int nc = busiest_nc(d, r.pid);
  const std::optional<int64_t> offset = nds_count_offset(d, r.pid, nc, anchors);
  bool split = false;
  uint64_t prev_errors = 0;
  bool have_prev = false;
  for (const auto& s : d.nds) {
    if (s.pid != r.pid || s.nc != nc) continue;
    uint64_t errs = s.snap.errors + s.snap.timeouts + s.snap.cc_hw_errors;
    uint64_t new_errs = have_prev && errs > prev_errors ? errs - prev_errors : (have_prev ? 0 : errs);
    prev_errors = errs;
    have_prev = true;
    // Executions missed between samples (a loaded host delays the drain):
    // the last-value words are the latest's, named by its count if the offset is known.
    if (s.delta != 1 && !offset) continue;
    StepResult* st = nds_step(r, s, anchors, offset);
    if (!st || st->dev.nds) continue;
    auto ns = [](double sec) { return static_cast<uint64_t>(sec * 1e9 + 0.5); };
    st->dev.nds = true;
    st->dev.exec_seq = s.snap.inference_count;
    st->dev.device_ns = ns(s.snap.device_s);
    st->dev.compute_ns = ns(s.snap.compute_s);
    st->dev.cc_ns = ns(s.snap.cc_s);
    st->dev.total_ns = ns(s.snap.total_s);
    st->dev.exec_errors = new_errs;
    // The split: the device's own collective time leaves device_execute.
    auto& de = st->ns[static_cast<size_t>(Category::device_execute)];
    uint64_t moved = std::min(st->dev.cc_ns, de);
    de -= moved;
    st->ns[static_cast<size_t>(Category::collective)] += moved;
    split = true;
  }
  return split;
}

// ---------------------------------------------------------------- EFA

// The adapter of rank `ri`: the one matching its device's position among the
// devices, else round robin.
int efa_port_of(const RankResult& r, size_t ri, const SignalsData& d) {
  int port = static_cast<int>(ri % d.efa_ports.size());
  if (auto it = d.pid_device.find(r.pid); it != d.pid_device.end()) {
    int ndev = d.devices.empty() ? 1 : d.devices.back().first + 1;
    int want = it->second * static_cast<int>(d.efa_ports.size()) / std::max(ndev, 1);
    for (size_t p = 0; p < d.efa_ports.size(); ++p)
      if (d.efa_ports[p].index == want) port = static_cast<int>(p);
  }
  return port;
}

// Network-bound test of one step: bytes / collective time vs the link rate,
// on each path: host-driven messages over the host collective time, device
// RDMA over the device's collective time (NDS). Writes each path's terms to
// the step (the summary adds them up); returns the best path's ratio (-1 none).
// `peer_wait_ns`: how long this rank waited in the step for the last rank to
// arrive; no byte of a collective moves before every rank is in it, so that
// wait is not link time (a late peer would make a saturated link look idle).
double step_net_ratio(StepResult& st, double link_gbit, uint64_t peer_wait_ns) {
  double link_Bps = link_gbit * 1e9 / 8;
  double best_ratio = -1;
  uint64_t coll = st.ns[static_cast<size_t>(Category::collective)];
  uint64_t dev_cc = st.dev.nds ? std::min(st.dev.cc_ns, coll) : 0;
  // The link moves bytes while the rank waits for a CPU in the collective (cpu_contention) too.
  uint64_t host_cc = coll - dev_cc + st.contention_under[static_cast<size_t>(Category::collective)];
  host_cc -= std::min(host_cc / 2, peer_wait_ns);  // at most half: arrival times are estimates
  using Path = signals::StepDeviceSignals::NetPath;
  auto consider = [&](uint64_t bytes, uint64_t ns, Path& path) {
    path = {};
    if (bytes == 0 || ns < 500'000 || link_Bps <= 0) return;
    best_ratio = std::max(best_ratio, static_cast<double>(bytes) / (static_cast<double>(ns) / 1e9) / link_Bps);
    path = {static_cast<double>(bytes) / link_Bps, static_cast<double>(ns) / 1e9};
  };
  consider(st.dev.efa_send_bytes, host_cc, st.dev.net_host);
  st.dev.net_device = {};
  if (st.dev.nds) consider(st.dev.efa_rdma_write_bytes, dev_cc, st.dev.net_device);
  st.dev.net_any = {};
  if (st.dev.efa_send_bytes == 0 && st.dev.efa_rdma_write_bytes == 0) consider(st.dev.efa_tx_bytes, coll, st.dev.net_any);
  return best_ratio;
}

// EFA: bytes on this rank's adapter per step, and the network-bound test.
void efa_to_steps(RankResult& r, size_t ri, const SignalsData& d, const std::vector<uint64_t>* last_arrival) {
  const int port = efa_port_of(r, ri, d);
  double link = d.efa_ports[static_cast<size_t>(port)].rate_gbit;
  auto delta = [&](const char* name, const StepResult& st) -> uint64_t {
    size_t k = signals::efa_counter_index(name);
    auto a = signals::efa_counter_at(d, port, k, st.start_ns), b = signals::efa_counter_at(d, port, k, st.end_ns);
    return a && b && *b > *a ? static_cast<uint64_t>(*b - *a + 0.5) : 0;
  };
  for (auto& st : r.steps) {
    st.dev.efa = true;
    st.dev.link_gbit = link;
    st.dev.efa_tx_bytes = delta("tx_bytes", st);
    st.dev.efa_rx_bytes = delta("rx_bytes", st);
    st.dev.efa_send_bytes = delta("send_bytes", st);
    st.dev.efa_rdma_write_bytes = delta("rdma_write_bytes", st);
    st.dev.efa_trouble = delta("rx_drops", st) + delta("retrans_pkts", st) + delta("retrans_timeout_events", st) +
                         delta("rdma_read_wr_err", st) + delta("rdma_write_wr_err", st) +
                         delta("unresponsive_remote_events", st) + delta("impaired_remote_conn_events", st);
    const size_t k = static_cast<size_t>(&st - r.steps.data());
    const uint64_t last = last_arrival && k < last_arrival->size() ? (*last_arrival)[k] : 0;
    const uint64_t wait = last > st.arrival_ns && st.arrival_ns > 0
                              ? std::min(last, st.end_ns) - std::min(st.arrival_ns, st.end_ns)
                              : 0;
    st.dev.net_ratio = step_net_ratio(st, link, wait);
  }
}

// ---------------------------------------------------------------- proxy threads

// Behaviour of a network proxy: runs inside the device collective of most
// executions (at least 3 with NDS).
// Executions with a device collective a thread must be seen in before its
// behaviour names it. Each window of a long session judges on its own steps
// (a job of multi-second steps has only a few in a window); once named, a
// thread is measured in every later window (AnalysisOptions::known_proxies).
constexpr int kBehaviourSteps = 3;

bool proxy_by_behaviour(const RankResult& r, const Execs& anchors, const ThreadTimeline& t) {
  int cc_steps = 0, ran = 0;
  for (const auto& st : r.steps) {
    if (!st.dev.nds || st.dev.cc_ns < 500'000) continue;
    uint64_t end = 0;
    for (const auto& [a, b] : anchors)
      if (a >= st.start_ns && a < st.end_ns) end = b;
    if (!end) continue;
    ++cc_steps;
    uint64_t ws = end > st.dev.cc_ns + 1'000'000 ? end - st.dev.cc_ns - 1'000'000 : 0;
    for (auto it = segs_ending_after(t, ws); it != t.segs.end() && it->start < end; ++it)
      if (it->state == ThreadState::running && overlap_ns(it->start, it->end, ws, end) > 0) {
        ++ran;
        break;
      }
  }
  return cc_steps >= kBehaviourSteps && ran * 10 >= cc_steps * 8;
}

// The proxy matters while it drives the device collective's network
// transfers: count its waits for a CPU inside the device collective (the end
// of each execution, NDS), else inside the executions, else (no runtime
// probes) in the whole step.
void proxy_runq(RankResult& r, const Execs& anchors, const std::vector<const ThreadTimeline*>& proxies) {
  std::map<uint32_t, uint32_t> by;  // this step's preemptors
  for (auto& st : r.steps) {
    Execs win;
    for (const auto& [a, b] : anchors)
      if (a < st.end_ns && b > st.start_ns) win.emplace_back(std::max(a, st.start_ns), std::min(b, st.end_ns));
    if (st.dev.nds && !win.empty()) {
      const uint64_t cc = st.dev.cc_ns / win.size();
      for (auto& [a, b] : win) a = std::max(a, b > cc ? b - cc : 0);
    }
    if (anchors.empty()) win.emplace_back(st.start_ns, st.end_ns);
    by.clear();
    for (const ThreadTimeline* t : proxies)
      for (auto it = segs_ending_after(*t, st.start_ns); it != t->segs.end(); ++it) {
        const auto& g = *it;
        if (g.start >= st.end_ns) break;
        if (g.state != ThreadState::runnable) continue;
        uint64_t in = 0;
        for (const auto& [a, b] : win) in += overlap_ns(g.start, g.end, a, b);
        if (!in) continue;
        st.dev.proxy_runq_ns += in;
        if (g.preempted_by) {
          ++st.dev.proxy_preempted;
          ++by[g.preempted_by];
        }
      }
    std::vector<std::pair<uint32_t, uint32_t>> top(by.begin(), by.end());
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t i = 0; i < top.size() && i < signals::StepDeviceSignals::kPreemptorsKept; ++i)
      st.dev.proxy_preemptors[i] = {top[i].first, top[i].second};
  }
}

// Network proxy threads of this rank, by name or by behaviour, and their
// run-queue delay per step.
void proxy_threads(RankResult& r, const Execs& anchors, const TimelineStore& tl, const ThreadTable& threads,
                   const SignalsData* d, const std::vector<signals::ProxyThread>* known, DeviceSignalsSummary& S) {
  std::vector<const ThreadTimeline*> proxies;
  for (const auto& [key, t] : tl.threads()) {
    const uint32_t tid = t.tid;
    if (t.pid != r.pid || key == r.main_tid) continue;
    std::string comm;
    if (d)
      if (auto it = d->comms.find(tid); it != d->comms.end()) comm = it->second;
    if (comm.empty())
      if (const auto* ti = threads.find(tid)) comm = ti->comm;
    bool by_name = proxy_name(comm);
    bool by_behaviour = proxy_by_behaviour(r, anchors, t);
    // Named by an earlier window of the session: measured in this one too.
    const signals::ProxyThread* before = nullptr;
    if (known)
      for (const auto& p : *known)
        if (p.pid == r.pid && p.tid == tid) before = &p;
    if (!by_name && !by_behaviour && !before) continue;
    const std::string how = by_name && by_behaviour ? "name+behaviour"
                            : by_name               ? "name"
                            : by_behaviour          ? "behaviour"
                                                    : before->how;
    S.proxies.push_back({r.pid, tid, comm.empty() && before ? before->comm : comm, how});
    proxies.push_back(&t);
  }
  if (!proxies.empty()) proxy_runq(r, anchors, proxies);
}

// What the proxies' delay in each step is compared with (the summary's tally_rank).
void proxy_bases(RankResult& r, const Execs& anchors) {
  using Base = signals::StepDeviceSignals::ProxyBase;
  for (auto& st : r.steps) {
    if (st.dev.nds) {
      st.dev.proxy_base = Base::device_collective;
      st.dev.proxy_base_ns = st.dev.cc_ns;
    } else if (!anchors.empty()) {
      st.dev.proxy_base = Base::executions;
      st.dev.proxy_base_ns = 0;
      for (const auto& [a, b] : anchors) st.dev.proxy_base_ns += overlap_ns(a, b, st.start_ns, st.end_ns);
    } else {
      st.dev.proxy_base = Base::step_collective;
      st.dev.proxy_base_ns = st.ns[static_cast<size_t>(Category::collective)];
    }
  }
}

// Each device's memory: at the last sample, its peak over the samples, by
// kind (the counters of every core summed), and an evidence line.
void device_memory(const SignalsData& d, DeviceSignalsSummary& S) {
  std::map<int, signals::DeviceMemory> by_dev;
  for (const auto& s : d.sysfs) {
    auto& m = by_dev[s.device];
    m.device = s.device;
    uint64_t dev = 0, host = 0;
    std::map<std::string, uint64_t> kinds;
    for (const auto& [k, v] : s.v) {
      if (auto at = k.find("/memory_usage/device_mem/"); at != std::string::npos) {
        dev += v;
        kinds[k.substr(at + 25)] += v;
      } else if (k.rfind("host_mem/", 0) == 0) {
        host += v;
      }
    }
    m.now_bytes = dev;
    m.peak_bytes = std::max(m.peak_bytes, dev);
    m.host_bytes = host;
    m.by_kind = std::move(kinds);
  }
  std::string line;
  auto gib = [](uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024 * 1024); };
  for (auto& [dev, m] : by_dev) {
    if (m.peak_bytes > 0) {
      std::string kinds;
      for (const auto& [k, v] : m.by_kind)
        if (v) kinds += fmt::format(", {} {:.2f} GiB", k, gib(v));
      line += fmt::format("{}neuron{} {:.2f} GiB (peak {:.2f} GiB{})", line.empty() ? "" : "; ", dev, gib(m.now_bytes),
                          gib(m.peak_bytes), kinds);
    }
    S.device_memory.push_back(std::move(m));
  }
  if (!line.empty()) S.evidence.push_back("device memory in use (Neuron sysfs): " + line);
}

// Neuron sysfs: status counters that moved in the window, and device memory.
void sysfs_deltas(const SignalsData& d, DeviceSignalsSummary& S) {
  std::map<int, const signals::SysfsSample*> first, last;
  for (const auto& s : d.sysfs) {
    if (!first.count(s.device)) first[s.device] = &s;
    last[s.device] = &s;
  }
  for (const auto& [dev, l] : last) {
    const auto* f = first[dev];
    for (const auto& [k, v] : l->v) {
      if (k.find("/status/") != std::string::npos) {
        auto it = f->v.find(k);
        uint64_t v0 = it == f->v.end() ? 0 : it->second;
        if (v > v0) S.sysfs_deltas.emplace_back(fmt::format("neuron{}/{}", dev, k), v - v0);
      } else if (k.find("device_mem") != std::string::npos) {
        S.device_mem_bytes += v;
      }
    }
  }
  device_memory(d, S);
}

}  // namespace

bool apply_device_signals(std::vector<RankResult*>& ranks, const TimelineStore& tl, const ThreadTable& threads,
                          const SignalsData* d, int skip, const std::vector<signals::ProxyThread>* known_proxies,
                          DeviceSignalsSummary* out) {
  DeviceSignalsSummary& S = *out;
  describe_sources(d, S);
  const std::vector<std::vector<uint64_t>> last_arrival = last_arrivals(ranks);
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    RankResult& r = *ranks[ri];
    const ThreadTimeline* main = tl.find(r.main_tid);
    Execs anchors;
    if (main)
      for (const auto& sp : main->spans)
        if (sp.kind == SpanKind::nrt_execute) anchors.emplace_back(sp.start, sp.end);
    if (d) nds_to_steps(r, anchors, *d);
    if (d && !d->efa_ports.empty() && !d->efa.empty())
      efa_to_steps(r, ri, *d, ri < last_arrival.size() ? &last_arrival[ri] : nullptr);
    proxy_threads(r, anchors, tl, threads, d, known_proxies, S);
    proxy_bases(r, anchors);
  }
  summarize_device_signal_steps({ranks.begin(), ranks.end()}, skip, threads, S);
  if (d && !d->sysfs.empty()) sysfs_deltas(*d, S);
  return S.split_from_nds;
}

}  // namespace steptrace
