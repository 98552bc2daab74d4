// SPDX-License-Identifier: Apache-2.0
#include "signals/device_signals.h"

#include <sys/stat.h>

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <cerrno>
#include <cstring>
#include <limits>

#include "util/sys_root.h"

namespace steptrace::signals {

namespace {
// When the scans for devices and adapters that are not there slow to one
// every 2 s (an idle session with no devices: each scan lists /dev and two
// sysfs directories, at every drain wake-up until then; measured 2026-12-05).
constexpr uint64_t kSlowScanAfterNs = 10'000'000'000ull;
}  // namespace

// ---------------------------------------------------------------- sampler

DeviceSignals::DeviceSignals(SignalsConfig cfg) {
  d_.cfg = std::move(cfg);
  if (!d_.cfg.enabled) {
    d_.nds_problem = "device counters disabled";
    return;
  }
  d_.devices = find_neuron_devices(d_.cfg.dev_root);
  d_.efa_ports = find_efa_ports(d_.cfg.sysfs_root);
  d_.numa = read_numa_topology(d_.cfg.sysfs_root);
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

namespace {

// Erase the samples before ts but the last one of each key before it.
template <typename V, typename Key>
void forget_keyed(V& v, uint64_t ts, Key key) {
  std::map<int, size_t> last_before;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].ts < ts) last_before[key(v[i])] = i;
  size_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    auto it = last_before.find(key(v[i]));
    if (v[i].ts < ts && (it == last_before.end() || it->second != i)) continue;
    if (out != i) v[out] = std::move(v[i]);
    ++out;
  }
  v.resize(out);
}

}  // namespace

void DeviceSignals::forget_before(uint64_t ts) {
  auto& n = d_.nds;
  n.erase(std::remove_if(n.begin(), n.end(), [&](const NdsSample& s) { return s.seen_ns < ts; }), n.end());
  forget_keyed(d_.efa, ts, [](const EfaSample& s) { return s.port; });
  forget_keyed(d_.sysfs, ts, [](const SysfsSample& s) { return s.device; });
}

template <typename V, typename T>
void DeviceSignals::keep(V& samples, T&& s) {
  if (samples.size() >= d_.cfg.max_samples) {
    ++d_.samples_dropped;
    return;
  }
  samples.push_back(std::forward<T>(s));
  if (keep_new_) fresh_of(samples).push_back(samples.back());
}

SignalsData DeviceSignals::take_new() {
  SignalsData out;
  out.nds = std::move(fresh_.nds);
  out.efa = std::move(fresh_.efa);
  out.sysfs = std::move(fresh_.sysfs);
  fresh_.nds.clear();
  fresh_.efa.clear();
  fresh_.sysfs.clear();
  return out;
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

uint64_t DeviceSignals::next_due_ns() const {
  if (!d_.cfg.enabled || last_tick_ == 0) return UINT64_MAX;
  uint64_t due = UINT64_MAX;
  const uint64_t soonest = last_tick_ + d_.cfg.nds_interval_ns;
  // An attached rank's datastore is read every nds_interval_ns.
  if (!attached_.empty()) due = soonest;
  // A rank still being attached: at its retry (quick at first, its first
  // executions follow nrt_init), until it gives up. A retry time already
  // past (a process that exited is no longer ticked) counts as the soonest.
  if (!d_.devices.empty() && !nds_unsupported_)
    for (const auto& [pid, p] : pending_)
      if (last_tick_ - p.first_ns <= d_.cfg.attach_give_up_ns) due = std::min(due, std::max(p.next_ns, soonest));
  if (!d_.efa_ports.empty()) due = std::min(due, std::max(next_efa_, last_tick_ + d_.cfg.efa_interval_ns / 2));
  if (!d_.devices.empty()) due = std::min(due, next_sysfs_);
  return due;
}

void DeviceSignals::tick(uint64_t now, const std::vector<uint32_t>& pids, const std::set<uint32_t>& accel_pids) {
  if (!d_.cfg.enabled) return;
  last_tick_ = now;
  // The job may create its devices and adapters after the session started
  // (a simulator mounts them; a driver loads): look again now and then.
  bool efa_settling = d_.efa_ports.empty() || (first_scan_ && now - first_scan_ < 5'000'000'000ull) ||
                      std::any_of(d_.efa_ports.begin(), d_.efa_ports.end(), [](const EfaPort& p) { return p.rate_gbit <= 0; });
  if ((d_.devices.empty() || efa_settling) && now >= next_scan_) {
    // Quickly while the job starts (its first steps need the datastore),
    // then every 200 ms, and every 2 s after kSlowScanAfterNs without them (a
    // host with no such device: an idle session's wake-ups should not be
    // spent on it; a real node's devices exist from the driver's load, and
    // the daemon already waits up to 2 s for a new job's).
    if (first_scan_ == 0) first_scan_ = now;
    const uint64_t age = now - first_scan_;
    next_scan_ = now + (age < 5'000'000'000ull ? 20'000'000 : age < kSlowScanAfterNs ? 200'000'000 : 2'000'000'000);
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
    // No device known by now: look for metrics at the device scan's pace.
    const bool none_late = d_.devices.empty() && d_.sysfs.empty() && first_scan_ && now - first_scan_ >= kSlowScanAfterNs;
    next_sysfs_ = now + (none_late ? std::max<uint64_t>(d_.cfg.sysfs_interval_ns, 2'000'000'000) : d_.cfg.sysfs_interval_ns);
    for (const auto& [idx, path] : d_.devices) {
      auto m = read_neuron_sysfs(d_.cfg.sysfs_root, idx);
      if (m.empty()) continue;
      keep(d_.sysfs, SysfsSample{now, idx, std::move(m)});
    }
    // No device known: look for any, but the driver's class directory first
    // (one stat where there is no driver; during the first seconds this runs
    // at every drain, and 16 stats a drain were 8 % of steptrace's CPU
    // tracing a job on fake devices).
    struct stat cls {};
    if (d_.devices.empty() && ::stat((d_.cfg.sysfs_root + "/devices/virtual/neuron_device").c_str(), &cls) == 0)
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

}  // namespace steptrace::signals
