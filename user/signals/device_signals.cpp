// SPDX-License-Identifier: Apache-2.0
#include "signals/device_signals.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <cerrno>
#include <cstring>
#include <limits>

#include "util/sys_root.h"

namespace steptrace::signals {

// ---------------------------------------------------------------- sampler

DeviceSignals::DeviceSignals(SignalsConfig cfg) {
  d_.cfg = std::move(cfg);
  if (!d_.cfg.enabled) {
    d_.nds_problem = "device counters disabled";
    return;
  }
  d_.devices = find_neuron_devices(d_.cfg.dev_root);
  d_.efa_ports = find_efa_ports(d_.cfg.sysfs_root);
  if (d_.devices.empty()) d_.nds_problem = fmt::format("no Neuron device under {}", d_.cfg.dev_root);
}

void DeviceSignals::note_problem(NdsError e, int err_no) {
  // Keep the most telling reason: unsupported/permission beat "no datastore".
  int rank = e == NdsError::unsupported || e == NdsError::no_permission ? 3
             : e == NdsError::map_failed || e == NdsError::bad_layout   ? 2
                                                                        : 1;
  if (rank < problem_rank_) return;
  problem_rank_ = rank;
  d_.nds_problem = fmt::format("{} ({})", nds_error_text(e), std::strerror(err_no));
}

DeviceSignals::~DeviceSignals() {
  attached_.clear();  // unmap before the device fds close
  close_devices();
}

void DeviceSignals::close_devices() {
  for (auto& [idx, f] : dev_fds_)
    if (f.fd >= 0) ops().close_device(f.fd);
  dev_fds_.clear();
}

// One fd per device for the session. A normal open attaches the opener as
// one of the device's 16 processes (device-counters.md 1.2), so it is done
// once, never per process or per attempt.
int DeviceSignals::device_fd(uint64_t now, int idx, const std::string& path) {
  DeviceFd& f = dev_fds_[idx];
  if (f.fd >= 0) return f.fd;
  if (now < f.retry_ns) return -1;
  ++d_.device_opens;
  int fd = ops().open_device(path);
  if (fd >= 0) {
    f.fd = fd;
    return fd;
  }
  const int e = errno;
  const bool perm = e == EACCES || e == EPERM;
  note_problem(perm ? NdsError::no_permission : NdsError::no_device, e);
  // No permission stays so; a device that went away may come back (driver reload).
  f.retry_ns = perm ? UINT64_MAX : now + 5'000'000'000ull;
  return -1;
}

// Serves processes not attached yet while the bucket has tokens: those seen
// driving an accelerator first, then the rest in turn from where the last
// tick stopped, so a long list is worked through instead of its head.
void DeviceSignals::attach_due(uint64_t now, const std::vector<uint32_t>& pids,
                               const std::set<uint32_t>& accel_pids) {
  if (nds_unsupported_) return;
  const double burst = std::max<double>(1, d_.cfg.attach_ioctl_burst);
  tokens_ = tokens_at_ == 0 ? burst
                            : std::min(burst, tokens_ + static_cast<double>(now - std::min(now, tokens_at_)) / 1e9 *
                                                            d_.cfg.attach_ioctls_per_s);
  tokens_at_ = now;
  // false: stop serving this tick (a pass cut short resumes where it stopped).
  auto serve = [&](uint32_t pid) {
    if (tokens_ < 1 || nds_unsupported_) return false;
    return attached_.count(pid) || try_attach(now, pid);
  };
  for (uint32_t pid : accel_pids)
    if (!serve(pid)) return;
  const uint32_t start = rr_next_;
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t pid : pids) {
      if ((pass == 0) != (pid >= start) || accel_pids.count(pid)) continue;
      const double before = tokens_;
      if (!serve(pid)) {
        if (tokens_ < before || tokens_ < 1) rr_next_ = pid;  // this one first next time
        return;
      }
      if (tokens_ < before) rr_next_ = pid + 1;
    }
}

bool DeviceSignals::try_attach(uint64_t now, uint32_t pid) {
  auto [it, fresh] = pending_.try_emplace(pid, Pending{now, now, 0});
  Pending& p = it->second;
  if (now < p.next_ns) return true;
  if (now - p.first_ns > d_.cfg.attach_give_up_ns) return true;
  for (; p.next_dev < d_.devices.size(); ++p.next_dev) {
    const auto& [idx, path] = d_.devices[p.next_dev];
    int fd = device_fd(now, idx, path);
    if (fd < 0) continue;
    if (tokens_ < 1) return false;  // resume at this device
    tokens_ -= 1;
    ++d_.acquire_calls;
    NdsView v;
    int err_no = 0;
    NdsError e = v.attach(fd, path, pid, &err_no, ops());
    if (e == NdsError::none && !nds_header_ok(v.data(), v.size())) e = NdsError::bad_layout;
    if (e != NdsError::none) {
      note_problem(e, err_no);
      // A driver without NDS answers the same for every pid: stop asking.
      if (e == NdsError::unsupported || e == NdsError::no_permission) {
        nds_unsupported_ = true;
        return true;
      }
      continue;
    }
    Attached a{idx, std::move(v), {}, now};
    d_.pid_device[pid] = idx;
    attached_.emplace(pid, std::move(a));
    pending_.erase(it);
    return true;  // one device per rank process (the first with its datastore)
  }
  // A whole pass and no datastore yet. A rank acquires its datastore in
  // nrt_init, right before its first executions, and each sample must see
  // one execution: retry quickly at first (every 10 ms), then back off to
  // attach_retry_ns.
  p.next_dev = 0;
  p.next_ns = now + std::clamp<uint64_t>((now - p.first_ns) / 10, 10'000'000, d_.cfg.attach_retry_ns);
  return true;
}

template <typename V, typename T>
void DeviceSignals::keep(V& samples, T&& s) {
  if (samples.size() >= d_.cfg.max_samples) {
    ++d_.samples_dropped;
    return;
  }
  samples.push_back(std::forward<T>(s));
}

void DeviceSignals::sample_nds(uint64_t now) {
  for (auto& [pid, a] : attached_) {
    for (int nc = 0; nc < 16; ++nc) {
      uint64_t seq = __atomic_load_n(
          reinterpret_cast<const uint64_t*>(a.view.data() + nds_nc_offset(nc, kNcInferenceCount)), __ATOMIC_ACQUIRE);
      uint64_t& last = a.last_seq[nc];
      if (seq == last) continue;
      if (seq > last) {
        NdsSample s;
        s.pid = pid;
        s.device = a.device;
        s.nc = nc;
        s.prev_ns = a.last_ns;
        s.seen_ns = now;
        s.snap = nds_read_nc(a.view.data(), a.view.size(), nc);
        s.delta = s.snap.inference_count - last;
        keep(d_.nds, s);
        last = s.snap.inference_count;
      } else {
        last = seq;  // slab released and reused: start over
      }
    }
    a.last_ns = now;
  }
}

void DeviceSignals::tick(uint64_t now, const std::vector<uint32_t>& pids, const std::set<uint32_t>& accel_pids) {
  if (!d_.cfg.enabled) return;
  // The job may create its devices and adapters after the session started
  // (a simulator mounts them; a driver loads): look again now and then.
  bool efa_settling = d_.efa_ports.empty() || (first_scan_ && now - first_scan_ < 5'000'000'000ull) ||
                      std::any_of(d_.efa_ports.begin(), d_.efa_ports.end(), [](const EfaPort& p) { return p.rate_gbit <= 0; });
  if ((d_.devices.empty() || efa_settling) && now >= next_scan_) {
    // Quickly while the job starts (its first steps need the datastore),
    // then every 200 ms.
    if (first_scan_ == 0) first_scan_ = now;
    next_scan_ = now + (now - first_scan_ < 5'000'000'000ull ? 20'000'000 : 200'000'000);
    if (d_.devices.empty()) {
      d_.devices = find_neuron_devices(d_.cfg.dev_root);
      if (!d_.devices.empty() && problem_rank_ == 0) d_.nds_problem.clear();
    }
    // Adapters appear one by one as ranks start (and a rate file may not be
    // written yet): merge, keeping each known port's position (samples
    // refer to it).
    if (efa_settling)
      for (auto& found : find_efa_ports(d_.cfg.sysfs_root)) {
        auto it = std::find_if(d_.efa_ports.begin(), d_.efa_ports.end(),
                               [&](const EfaPort& p) { return p.index == found.index; });
        if (it == d_.efa_ports.end()) d_.efa_ports.push_back(std::move(found));
        else if (it->rate_gbit <= 0) it->rate_gbit = found.rate_gbit;
      }
  }
  if (!d_.devices.empty()) attach_due(now, pids, accel_pids);
  sample_nds(now);
  if (!d_.efa_ports.empty() && now >= next_efa_) {
    next_efa_ = now + d_.cfg.efa_interval_ns;
    const auto& names = efa_counter_names();
    for (size_t p = 0; p < d_.efa_ports.size(); ++p) {
      auto m = read_efa_counters(d_.efa_ports[p]);
      EfaSample s;
      s.ts = now;
      s.port = static_cast<int>(p);
      s.v.reserve(names.size());
      for (const auto& n : names) {
        auto it = m.find(n);
        s.v.push_back(it == m.end() ? UINT64_MAX : it->second);
      }
      // Keep only changes (plus the first): counters are flat between bursts.
      bool same = false;
      for (auto r = d_.efa.rbegin(); r != d_.efa.rend(); ++r)
        if (r->port == s.port) {
          same = r->v == s.v;
          break;
        }
      if (same) {
        // Remember that nothing moved until now: extend with the newest time.
        EfaSample flat = s;
        keep(d_.efa, std::move(flat));
        // Collapse runs of equal samples to their first and last.
        size_t n = d_.efa.size();
        if (n >= 3) {
          auto& a = d_.efa[n - 3];
          auto& b = d_.efa[n - 2];
          if (a.port == s.port && b.port == s.port && a.v == s.v && b.v == s.v) d_.efa.erase(d_.efa.end() - 2);
        }
      } else {
        keep(d_.efa, std::move(s));
      }
    }
  }
  // Low rate once the metrics are there; until then (for the first seconds,
  // while a job creates its devices) every tick, so that the first sample
  // is taken as the device appears and even a short job gets a delta.
  bool sysfs_waiting = d_.sysfs.empty() && first_scan_ && now - first_scan_ < 5'000'000'000ull;
  if (now >= next_sysfs_ || sysfs_waiting) {
    next_sysfs_ = now + d_.cfg.sysfs_interval_ns;
    for (const auto& [idx, path] : d_.devices) {
      auto m = read_neuron_sysfs(d_.cfg.sysfs_root, idx);
      if (m.empty()) continue;
      keep(d_.sysfs, SysfsSample{now, idx, std::move(m)});
    }
    if (d_.devices.empty())
      for (int idx = 0; idx < 16; ++idx) {
        auto m = read_neuron_sysfs(d_.cfg.sysfs_root, idx);
        if (!m.empty()) keep(d_.sysfs, SysfsSample{now, idx, std::move(m)});
      }
  }
  if (now >= next_comm_) {
    next_comm_ = now + 200'000'000;
    SysRoot root(d_.cfg.proc_root, d_.cfg.sysfs_root);
    for (const auto& [pid, a] : attached_)
      for (uint32_t tid : root.threads_of(pid))
        if (auto c = root.thread_comm(pid, tid)) {
          d_.comms[tid] = *c;
          d_.tid_pid[tid] = pid;
        }
  }
}

SignalsData DeviceSignals::take() {
  attached_.clear();
  close_devices();
  return std::move(d_);
}

// ---------------------------------------------------------------- analysis

namespace {

uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  uint64_t s = std::max(a0, b0), e = std::min(a1, b1);
  return e > s ? e - s : 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Counter value of port `p`, counter `k` at time t (linear between samples).
std::optional<double> efa_at(const SignalsData& d, int p, size_t k, uint64_t t) {
  const EfaSample* lo = nullptr;
  const EfaSample* hi = nullptr;
  for (const auto& s : d.efa) {
    if (s.port != p || k >= s.v.size() || s.v[k] == UINT64_MAX) continue;
    if (s.ts <= t) lo = &s;
    if (s.ts >= t) {
      hi = &s;
      break;
    }
  }
  if (!lo && !hi) return std::nullopt;
  if (!lo) return static_cast<double>(hi->v[k]);
  if (!hi || hi->ts == lo->ts) return static_cast<double>(lo->v[k]);
  double f = static_cast<double>(t - lo->ts) / static_cast<double>(hi->ts - lo->ts);
  return static_cast<double>(lo->v[k]) + f * (static_cast<double>(hi->v[k]) - static_cast<double>(lo->v[k]));
}

size_t efa_index(const std::string& name) {
  const auto& n = efa_counter_names();
  return static_cast<size_t>(std::find(n.begin(), n.end(), name) - n.begin());
}

bool proxy_name(const std::string& comm) {
  std::string c = comm;
  for (auto& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return c.find("proxy") != std::string::npos || c.rfind("nccl", 0) == 0 || c.rfind("nccom", 0) == 0;
}

}  // namespace

bool apply_device_signals(std::vector<RankResult*>& ranks, const TimelineStore& tl, const ThreadTable& threads,
                          const SignalsData* d, int skip, DeviceSignalsSummary* out) {
  DeviceSignalsSummary& S = *out;
  if (!d) {
    S.nds.detail = S.efa.detail = S.neuron_sysfs.detail = "not sampled (replay of a capture, or disabled)";
    S.proxy.detail = "no proxy threads identified";
  } else {
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
  bool split = false;
  std::vector<double> compute_ms, cc_ms, device_ms, ratios, tx_mib;
  // Window totals per path (host messages, device RDMA, any traffic): bytes
  // and collective time. A counter update that lands just after a step
  // boundary moves bytes between neighbouring steps but not out of the
  // window, so the window's rate is what the network-bound test uses.
  struct PathTotal {
    double bytes = 0, seconds = 0;
  };
  PathTotal host_path, device_path, any_path;
  double link_gbit = 0;
  uint64_t proxy_runq = 0, proxy_preempts = 0, proxy_coll_ns = 0;
  std::map<uint32_t, uint64_t> preemptors;  // tid -> preemptions of proxy threads
  int proxy_steps = 0;
  bool proxy_base_nds = false, proxy_base_exec = false;

  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    RankResult& r = *ranks[ri];
    const ThreadTimeline* main = tl.find(r.main_tid);
    std::vector<std::pair<uint64_t, uint64_t>> anchors;
    if (main)
      for (const auto& sp : main->spans)
        if (sp.kind == SpanKind::nrt_execute) anchors.emplace_back(sp.start, sp.end);
    auto step_at = [&](uint64_t t) -> StepResult* {
      for (auto& st : r.steps)
        if (t >= st.start_ns && t < st.end_ns) return &st;
      return nullptr;
    };
    // ---- NDS: one exact sample per execution -> its step.
    if (d) {
      // The NC this rank executes on: the one with the most samples.
      std::map<int, int> per_nc;
      for (const auto& s : d->nds)
        if (s.pid == r.pid) ++per_nc[s.nc];
      int nc = -1, best = 0;
      for (const auto& [n, c] : per_nc)
        if (c > best) {
          best = c;
          nc = n;
        }
      // Which execution a one-execution sample describes. The runtime
      // writes the record after it sees completion and before nrt_execute
      // returns (the acknowledgement in between can take milliseconds), so
      // it is an execution that started before the sample and had not
      // returned before the previous one. Where exactly one execution
      // qualifies, (execution count - its index) gives the offset between
      // the datastore's count and our executions; with that, every sample
      // maps by its count, so a lost or late sample shifts nothing.
      constexpr uint64_t kSlack = 2'000'000;
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
      for (const auto& s : d->nds) {
        if (s.pid != r.pid || s.nc != nc || s.delta != 1) continue;
        size_t i = 0;
        if (candidates(s, &i) == 1)
          ++offset_votes[static_cast<int64_t>(s.snap.inference_count) - static_cast<int64_t>(i)];
      }
      std::optional<int64_t> offset;
      int votes = 0;
      for (const auto& [o, v] : offset_votes)
        if (v > votes) votes = v, offset = o;
      uint64_t prev_errors = 0;
      bool have_prev = false;
      for (const auto& s : d->nds) {
        if (s.pid != r.pid || s.nc != nc) continue;
        uint64_t errs = s.snap.errors + s.snap.timeouts + s.snap.cc_hw_errors;
        uint64_t new_errs = have_prev && errs > prev_errors ? errs - prev_errors : (have_prev ? 0 : errs);
        prev_errors = errs;
        have_prev = true;
        if (s.delta != 1) continue;  // two executions between samples: last-value words hold only one
        StepResult* st = nullptr;
        if (offset) {
          int64_t i = static_cast<int64_t>(s.snap.inference_count) - *offset;
          if (i >= 0 && i < static_cast<int64_t>(anchors.size())) st = step_at(anchors[static_cast<size_t>(i)].first);
        } else {
          // No unambiguous sample: the earliest qualifying execution whose
          // step has no record yet.
          for (const auto& [a, b] : anchors) {
            if (a >= s.seen_ns) break;
            if (b + kSlack <= s.prev_ns) continue;
            StepResult* cand = step_at(a);
            if (cand && !cand->dev.nds) {
              st = cand;
              break;
            }
          }
        }
        if (anchors.empty() && s.prev_ns) st = step_at(s.prev_ns + (s.seen_ns - s.prev_ns) / 2);
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
    }
    // ---- EFA: bytes on this rank's adapter per step.
    if (d && !d->efa_ports.empty() && !d->efa.empty()) {
      int port = static_cast<int>(ri % d->efa_ports.size());
      if (auto it = d->pid_device.find(r.pid); it != d->pid_device.end()) {
        int ndev = d->devices.empty() ? 1 : d->devices.back().first + 1;
        int want = it->second * static_cast<int>(d->efa_ports.size()) / std::max(ndev, 1);
        for (size_t p = 0; p < d->efa_ports.size(); ++p)
          if (d->efa_ports[p].index == want) port = static_cast<int>(p);
      }
      double link = d->efa_ports[static_cast<size_t>(port)].rate_gbit;
      link_gbit = std::max(link_gbit, link);
      auto delta = [&](const char* name, const StepResult& st) -> uint64_t {
        size_t k = efa_index(name);
        auto a = efa_at(*d, port, k, st.start_ns), b = efa_at(*d, port, k, st.end_ns);
        return a && b && *b > *a ? static_cast<uint64_t>(*b - *a + 0.5) : 0;
      };
      for (auto& st : r.steps) {
        st.dev.efa = true;
        st.dev.efa_tx_bytes = delta("tx_bytes", st);
        st.dev.efa_rx_bytes = delta("rx_bytes", st);
        st.dev.efa_send_bytes = delta("send_bytes", st);
        st.dev.efa_rdma_write_bytes = delta("rdma_write_bytes", st);
        st.dev.efa_trouble = delta("rx_drops", st) + delta("retrans_pkts", st) + delta("retrans_timeout_events", st) +
                             delta("rdma_read_wr_err", st) + delta("rdma_write_wr_err", st) +
                             delta("unresponsive_remote_events", st) + delta("impaired_remote_conn_events", st);
        // Network-bound test: bytes / collective time vs the link rate, on
        // each path: host-driven messages over the host collective time,
        // device RDMA over the device's collective time (NDS).
        double link_Bps = link * 1e9 / 8;
        double best_ratio = -1;
        uint64_t coll = st.ns[static_cast<size_t>(Category::collective)];
        uint64_t dev_cc = st.dev.nds ? std::min(st.dev.cc_ns, coll) : 0;
        uint64_t host_cc = coll - dev_cc;
        const bool counted = st.index >= skip;
        auto consider = [&](uint64_t bytes, uint64_t ns, PathTotal& total) {
          if (bytes == 0 || ns < 500'000 || link_Bps <= 0) return;
          best_ratio = std::max(best_ratio, static_cast<double>(bytes) / (static_cast<double>(ns) / 1e9) / link_Bps);
          if (counted) {
            total.bytes += static_cast<double>(bytes) / link_Bps;  // in link-seconds
            total.seconds += static_cast<double>(ns) / 1e9;
          }
        };
        consider(st.dev.efa_send_bytes, host_cc, host_path);
        if (st.dev.nds) consider(st.dev.efa_rdma_write_bytes, dev_cc, device_path);
        if (st.dev.efa_send_bytes == 0 && st.dev.efa_rdma_write_bytes == 0) consider(st.dev.efa_tx_bytes, coll, any_path);
        st.dev.net_ratio = best_ratio;
        if (st.index >= skip) {
          if (best_ratio >= 0) ratios.push_back(best_ratio);
          tx_mib.push_back(static_cast<double>(st.dev.efa_tx_bytes) / 1048576.0);
        }
      }
    }
    // ---- Network proxy threads of this rank: by name or by behaviour.
    for (const auto& [tid, t] : tl.threads()) {
      if (t.pid != r.pid || tid == r.main_tid) continue;
      std::string comm;
      if (d)
        if (auto it = d->comms.find(tid); it != d->comms.end()) comm = it->second;
      if (comm.empty())
        if (const auto* ti = threads.find(tid)) comm = ti->comm;
      bool by_name = proxy_name(comm);
      // Behaviour: runs inside the device collective of most executions.
      int cc_steps = 0, ran = 0;
      for (const auto& st : r.steps) {
        if (!st.dev.nds || st.dev.cc_ns < 500'000) continue;
        uint64_t end = 0;
        for (const auto& [a, b] : anchors)
          if (a >= st.start_ns && a < st.end_ns) end = b;
        if (!end) continue;
        ++cc_steps;
        uint64_t ws = end > st.dev.cc_ns + 1'000'000 ? end - st.dev.cc_ns - 1'000'000 : 0;
        for (const auto& g : t.segs)
          if (g.state == ThreadState::running && overlap(g.start, g.end, ws, end) > 0) {
            ++ran;
            break;
          }
      }
      bool by_behaviour = cc_steps >= 3 && ran * 10 >= cc_steps * 8;
      if (!by_name && !by_behaviour) continue;
      S.proxies.push_back({r.pid, tid, comm, by_name && by_behaviour ? "name+behaviour" : by_name ? "name" : "behaviour"});
      // The proxy matters while it drives the device collective's network
      // transfers: count its waits for a CPU inside the device collective
      // (the end of each execution, NDS), else inside the executions, else
      // (no runtime probes) in the whole step.
      for (auto& st : r.steps) {
        std::vector<std::pair<uint64_t, uint64_t>> win;
        for (const auto& [a, b] : anchors)
          if (a < st.end_ns && b > st.start_ns) win.emplace_back(std::max(a, st.start_ns), std::min(b, st.end_ns));
        if (st.dev.nds && !win.empty()) {
          const uint64_t cc = st.dev.cc_ns / win.size();
          for (auto& [a, b] : win) a = std::max(a, b > cc ? b - cc : 0);
        }
        if (anchors.empty()) win.emplace_back(st.start_ns, st.end_ns);
        for (const auto& g : t.segs) {
          if (g.end <= st.start_ns) continue;
          if (g.start >= st.end_ns) break;
          if (g.state != ThreadState::runnable) continue;
          uint64_t in = 0;
          for (const auto& [a, b] : win) in += overlap(g.start, g.end, a, b);
          if (!in) continue;
          st.dev.proxy_runq_ns += in;
          if (g.preempted_by) {
            ++st.dev.proxy_preempted;
            if (st.index >= skip) ++preemptors[g.preempted_by];
          }
        }
      }
    }
    bool has_proxy = false;
    for (const auto& p : S.proxies) has_proxy |= p.pid == r.pid;
    for (const auto& st : r.steps) {
      if (st.index < skip) continue;
      if (has_proxy) {
        proxy_runq += st.dev.proxy_runq_ns;
        proxy_preempts += st.dev.proxy_preempted;
        // What the proxy's delay is compared with: the device collective
        // (NDS), else the executions it happens in, else the step's collective.
        uint64_t exec_ns = 0;
        for (const auto& [a, b] : anchors) exec_ns += overlap(a, b, st.start_ns, st.end_ns);
        if (st.dev.nds) {
          proxy_coll_ns += st.dev.cc_ns;
          proxy_base_nds = true;
        } else {
          proxy_coll_ns += anchors.empty() ? st.ns[static_cast<size_t>(Category::collective)] : exec_ns;
          proxy_base_exec = proxy_base_exec || !anchors.empty();
        }
        ++proxy_steps;
      }
      if (!st.dev.nds) continue;
      compute_ms.push_back(static_cast<double>(st.dev.compute_ns) / 1e6);
      cc_ms.push_back(static_cast<double>(st.dev.cc_ns) / 1e6);
      device_ms.push_back(static_cast<double>(st.dev.device_ns) / 1e6);
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  S.split_from_nds = split;
  S.mean_compute_ms = mean(compute_ms);
  S.mean_cc_ms = mean(cc_ms);
  S.mean_device_ms = mean(device_ms);
  // Medians decide: one stalled collective must not flip the whole window.
  if (!compute_ms.empty()) S.execution_bound = median(cc_ms) > median(compute_ms) ? "collective" : "compute";
  S.link_gbit = link_gbit;
  S.net_ratio = -1;
  for (const PathTotal* p : {&host_path, &device_path, &any_path})
    if (p->seconds > 0) S.net_ratio = std::max(S.net_ratio, p->bytes / p->seconds);
  if (S.net_ratio < 0 && !ratios.empty()) S.net_ratio = median(ratios);
  S.achieved_gbit = S.net_ratio >= 0 ? S.net_ratio * link_gbit : 0;
  S.network_bound = S.net_ratio >= 0.7;
  S.efa_mib_per_step = mean(tx_mib);
  S.proxy.available = !S.proxies.empty();
  S.proxy.detail = S.proxy.available ? fmt::format("{} proxy thread(s)", S.proxies.size())
                                     : "no network proxy thread identified (by name or behaviour)";
  S.proxy_runq_ms_per_step = proxy_steps ? static_cast<double>(proxy_runq) / proxy_steps / 1e6 : 0;
  S.proxy_preempted_per_step = proxy_steps ? static_cast<double>(proxy_preempts) / proxy_steps : 0;
  S.proxy_runq_share_of_collective =
      proxy_coll_ns ? static_cast<double>(proxy_runq) / static_cast<double>(proxy_coll_ns) : 0;
  S.proxy_share_of = proxy_base_nds    ? "inside the device collective (NDS)"
                     : proxy_base_exec ? "inside executions (no NDS: the device collective is not known)"
                                       : "inside the step's collective";
  if (!preemptors.empty()) {
    auto top = std::max_element(preemptors.begin(), preemptors.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    const auto* ti = threads.find(top->first);
    auto text = fmt::format("{}/{}", ti && !ti->comm.empty() ? ti->comm : "?", top->first);
    std::snprintf(S.proxy_top_preemptor, sizeof(S.proxy_top_preemptor), "%s", text.c_str());
  }
  // ---- Neuron sysfs: status counters that moved in the window.
  if (d && !d->sysfs.empty()) {
    std::map<int, const SysfsSample*> first, last;
    for (const auto& s : d->sysfs) {
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
  }
  return split;
}

void annotate_verdict(JobAnalysis& job) {
  auto& S = job.signals;
  auto& v = job.verdict;
  auto yn = [](const SignalSource& s) { return s.available ? "yes" : "no"; };
  const uint64_t verbs = job.fabric.calls();
  v.evidence.push_back(fmt::format(
      "device signals: NDS {} ({}); EFA {} ({}); neuron sysfs {} ({}); proxy threads {}; EFA control path {}",
      yn(S.nds), S.nds.detail, yn(S.efa), S.efa.detail, yn(S.neuron_sysfs), S.neuron_sysfs.detail, yn(S.proxy),
      verbs ? fmt::format("yes ({} uverbs calls)", verbs) : std::string("no (no uverbs calls seen)")));
  if (S.split_from_nds) {
    v.evidence.push_back(fmt::format(
        "inside each execution (NDS): device compute {:.1f} ms, device collective {:.1f} ms of {:.1f} ms on the "
        "device -> executions are {}-bound",
        S.mean_compute_ms, S.mean_cc_ms, S.mean_device_ms, S.execution_bound));
    if (job.ranks.size() > 0 && (v.category == Category::device_execute || v.category == Category::collective))
      v.headline += fmt::format(" [executions {}-bound per NDS: compute {:.1f} ms, collective {:.1f} ms]",
                                S.execution_bound, S.mean_compute_ms, S.mean_cc_ms);
  } else if (!job.ranks.empty()) {
    v.evidence.push_back("device compute vs device collective: NDS unavailable, estimated from cross-rank arrival skew");
  }
  if (S.efa.available) {
    v.evidence.push_back(fmt::format(
        "EFA: {:.1f} MiB/step on the rank's adapter; collective achieves {:.2f} Gbit/s of a {:.1f} Gbit/s link "
        "(ratio {:.2f}) -> {}",
        S.efa_mib_per_step, S.achieved_gbit, S.link_gbit, S.net_ratio,
        S.network_bound ? "network-bound collective" : "not network-bound"));
    if (S.network_bound && v.category == Category::collective) v.headline += "; the collective is network-bound";
  }
  if (S.proxy.available) {
    std::string names;
    for (size_t i = 0; i < S.proxies.size() && i < 4; ++i)
      names += fmt::format("{}{}/{} ({})", i ? ", " : "", S.proxies[i].comm, S.proxies[i].tid, S.proxies[i].how);
    std::string by = S.proxy_top_preemptor[0] ? fmt::format(", most by {}", S.proxy_top_preemptor) : "";
    v.evidence.push_back(fmt::format(
        "network proxy threads {}: run-queue delay {:.2f} ms/step {} ({:.0f}% of it), preempted "
        "{:.1f} times/step{}{}",
        names, S.proxy_runq_ms_per_step, S.proxy_share_of, 100 * S.proxy_runq_share_of_collective,
        S.proxy_preempted_per_step, by,
        S.proxy_runq_share_of_collective >= 0.1 ? " -> the collective waits on a CPU for its proxy: pin or isolate "
                                                  "the proxy threads' CPUs"
                                                : ""));
  }
  if (!S.sysfs_deltas.empty()) {
    std::string s;
    for (size_t i = 0; i < S.sysfs_deltas.size() && i < 6; ++i)
      s += fmt::format("{}{} +{}", i ? ", " : "", S.sysfs_deltas[i].first, S.sysfs_deltas[i].second);
    v.evidence.push_back(fmt::format("neuron sysfs in the window: {}", s));
  }
}

}  // namespace steptrace::signals
