// SPDX-License-Identifier: Apache-2.0
// The tracer the daemon hosts, rebuilt when the degradation level changes
// what it collects, and the per-process in-kernel counters it reads.
#include "daemon/daemon_impl.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "daemon/daemon.h"
#include "util/log.h"
#include "util/sys_root.h"

namespace steptrace::daemon {

uint64_t rss_bytes() {
  auto s = read_small_file("/proc/self/statm", 4096);
  if (!s) return 0;
  unsigned long size = 0, res = 0;
  if (std::sscanf(s->c_str(), "%lu %lu", &size, &res) != 2) return 0;
  return static_cast<uint64_t>(res) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

double now_s() { return static_cast<double>(monotonic_ns()) / 1e9; }

st_proc_agg operator+(const st_proc_agg& a, const st_proc_agg& b) {
  return {a.oncpu_ns + b.oncpu_ns,
          a.runq_wait_ns + b.runq_wait_ns,
          a.switches + b.switches,
          a.involuntary + b.involuntary,
          a.net_send_bytes + b.net_send_bytes,
          a.net_recv_bytes + b.net_recv_bytes,
          a.block_read_bytes + b.block_read_bytes,
          a.block_write_bytes + b.block_write_bytes,
          a.block_rqs + b.block_rqs};
}

uint32_t Daemon::wanted_subsystems() const {
  uint32_t s = base_subsystems_;
  int lvl = budget_.level();
  if (lvl >= kLevelNoNet) s &= ~static_cast<uint32_t>(ST_SUB_NET);
  if (lvl >= kLevelNoBlock) s &= ~static_cast<uint32_t>(ST_SUB_BLOCK);
  if (lvl >= kLevelNoSched) s &= ~static_cast<uint32_t>(ST_SUB_SCHED);
  if (lvl >= kLevelPaused) s = 0;
  return s;
}

bool Daemon::detail_wanted() const { return cycle_.detail(budget_.level(), cfg_.sample_every); }

// At the start of every window: the BPF switches for the level and the
// window's place in the sampling cycle.
void Daemon::apply_detail() {
  window_detail_ = detail_wanted();
  if (!tracer_) return;
  if (window_detail_ && !bpf_detail_) detail_since_ns_ = monotonic_ns();
  // The programs' rate changes with detail: measure it afresh (bpf_stats_duty.h).
  if (window_detail_ != bpf_detail_) stats_.remeasure();
  bpf_detail_ = window_detail_;
  detail_since_sample_ = detail_since_sample_ || window_detail_;
  tracer_->set_detail(window_detail_);
  tracer_->set_aggregate(budget_.level() >= kLevelAggregated);
}

void Daemon::enter_level(int level) {
  applied_level_ = level;
  stats_.remeasure();  // another level, other programs or another rate
  drain_ms_ = level >= kLevelSlowDrain ? std::max<uint32_t>(cfg_.drain_ms * 10, 100) : cfg_.drain_ms;
  if (wait_) wait_->set_drain_ms(drain_ms_);
  // Sampled costs most in its detailed windows: judge it over a whole cycle.
  budget_.set_window(level == kLevelSampled
                         ? std::max(BudgetController::kWindowS, cfg_.window_s * static_cast<double>(cfg_.sample_every))
                         : BudgetController::kWindowS);
}

void Daemon::read_aggregates(bool tracer_going) {
  std::map<uint32_t, st_proc_agg> live;
  if (tracer_) {
    if (auto m = tracer_->read_proc_agg()) live = std::move(*m);
    else log::debug("aggregation map: {}", m.error().message);
  }
  double now = now_s();
  for (const auto& [tgid, v] : live) {
    auto it = agg_.find(tgid);
    if (it != agg_.end() && it->second.gone_at_s > 0) {
      retire_agg(it->second);  // the pid was reused: a new process
      agg_.erase(it);
      it = agg_.end();
    }
    if (it == agg_.end()) {
      ProcIdentity id;
      if (auto c = identity_cache_.find(tgid); c != identity_cache_.end()) id = c->second;
      else id = scanner_.identity(tgid);
      ProcAggSeries s;
      s.job = id.job;
      s.rank = id.rank;
      s.comm = id.comm;
      it = agg_.emplace(tgid, std::move(s)).first;
    }
    ProcAggSeries& s = it->second;
    s.cur = s.base + v;
    if (tracer_going) {
      s.base = s.cur;  // the next tracer's map starts from zero
    } else if (!scanner_.alive(tgid)) {
      // Exited (reaped: every thread has left its CPU for good). Keep the
      // final counts in userspace for a while, free the kernel's key now.
      s.base = s.cur;
      s.gone_at_s = now;
      tracer_->forget_proc_agg(tgid);
    }
  }
  // Series whose key is gone (tracer rebuilt, or paused) end when the process does.
  for (auto& [tgid, s] : agg_)
    if (s.gone_at_s == 0 && !live.count(tgid) && !scanner_.alive(tgid)) s.gone_at_s = now;
  const double keep_s = std::max(10.0, 2 * cfg_.window_s);
  for (auto it = agg_.begin(); it != agg_.end();) {
    if (it->second.gone_at_s > 0 && now - it->second.gone_at_s > keep_s) {
      retire_agg(it->second);
      it = agg_.erase(it);
    } else {
      ++it;
    }
  }
  // A label set whose last process is gone ends with it.
  std::set<AggKey> live_keys;
  for (const auto& [tgid, s] : agg_) live_keys.insert(agg_key(s));
  for (auto it = agg_retired_.begin(); it != agg_retired_.end();) {
    if (!live_keys.count(it->first)) it = agg_retired_.erase(it);
    else ++it;
  }
}

// A process leaves agg_: its final counts stay in its label set's sum.
void Daemon::retire_agg(const ProcAggSeries& s) {
  auto& r = agg_retired_[agg_key(s)];
  r = r + s.cur;
}

Status Daemon::build_tracer() {
  active_subsystems_ = wanted_subsystems();
  if (active_subsystems_ == 0) {
    log::warn("tracing paused (degradation level {})", kLevels[budget_.level()].name);
    return Ok{};
  }
  TracerSettings ts;
  ts.filter_mode = ST_FILTER_TGID;
  ts.follow_forks = true;
  ts.subsystems = active_subsystems_;
  ts.ring_bytes = static_cast<uint64_t>(cfg_.ring_mib) << 20;
  ts.btf_path = cfg_.btf_path;
  dev_files_ = DevFileSet(cfg_.accel_devs, cfg_.rdma_devs);
  set_devices(ts, host_devices_, dev_files_);
  ts.agg_processes = ST_MAX_AGG_PROCS;
  ts.max_targets = cfg_.max_targets;
  ts.ring_wake_fill = kRingWakeFill;  // a burst wakes the drain before the timer (wait_)
  auto tracer = BpfTracer::create(ts, features_);
  if (!tracer) return make_error(fmt::format("cannot trace: {}", tracer.error().message));
  tracer_ = std::move(*tracer);
  auto reader = RingReader::create(tracer_->ring_map_fd(), ts.ring_bytes, [this](const void* d, size_t n) { on_record(d, n); });
  if (!reader) return reader.error();
  reader_ = std::move(*reader);
  if (auto w = DrainWait::create(tracer_->ring_map_fd(), drain_ms_, kIdleDrainMs); w) {
    wait_ = std::move(*w);
  } else {
    wait_.reset();
    log::warn("drains on a fixed {} ms timer: {}", drain_ms_, w.error().message);
  }
  resolve_accel_devs(true);
  probed_libs_.clear();
  if (active_subsystems_ & ST_SUB_UPROBE) {
    for (const auto& lib : cfg_.runtime_libs) attach_lib(lib);
    auto libs = known_libs_;
    for (const auto& lib : libs) attach_lib(lib);
  }
  // Targets: the holders and every descendant they have now (the kernel follows new ones).
  for (const auto& [pid, id] : tracked_) {
    add_target(pid);
    for (auto [c, parent] : scanner_.descendants(pid)) {
      add_target(c);
      note_parent(c, parent);
    }
  }
  window_start_ns_ = monotonic_ns();
  pipe_.start_window();
  window_open_ = true;
  seed_parents();
  if (auto d = tracer_->read_stats()) drops_window_start_ = *d;
  apply_detail();
  return Ok{};
}

DropStats Daemon::cumulative_drops() const {
  DropStats d = drops_base_;
  if (tracer_)
    if (auto cur = tracer_->read_stats()) d += *cur;
  d.losses[ST_LOSS_TARGET_ADD] += target_add_failed_total_;
  return d;
}

void Daemon::drop_tracer() {
  if (!tracer_) return;
  read_aggregates(true);
  if (reader_) (void)reader_->drain();
  pipe_.flush();
  close_window(monotonic_ns(), "tracer_rebuild");
  if (auto cur = tracer_->read_stats()) drops_base_ += *cur;
  for (const auto& p : tracer_->prog_stats()) {
    prog_base_s_[p.name] += static_cast<double>(p.run_time_ns) / 1e9;
    bpf_base_ns_ += p.run_time_ns;
    bpf_base_cnt_ += p.run_cnt;
  }
  wait_.reset();  // it polls the ring's fd, which goes with the tracer
  reader_.reset();
  tracer_.reset();
  bpf_detail_ = false;
  pipe_.restart();
}

void Daemon::apply_level(int level, const char* why) {
  const auto& l = kLevels[level];
  cycle_.level_changed();
  std::string sampling =
      level == kLevelSampled ? fmt::format(" (N = {}: detail in 1 of every {} windows of {} s)", cfg_.sample_every,
                                           cfg_.sample_every, cfg_.window_s)
                             : "";
  log::warn("CPU budget: {} (tracer CPU {:.2f}% of one core, budget {:.2f}%): degraded to level {} '{}': {}{}", why,
            budget_.last_decision_percent(), budget_.budget_percent(), level, l.name, l.what, sampling);
  // A window never mixes detail policies: the one that ran under the old
  // level is closed (and published by its own rule) before the switch.
  auto mode = [](int lv) { return lv < kLevelSampled ? 0 : lv == kLevelSampled ? 1 : 2; };
  bool mode_changes = mode(level) != mode(applied_level_);
  enter_level(level);
  if (wanted_subsystems() != active_subsystems_) {
    drop_tracer();
    if (auto s = build_tracer(); !s) {
      // Nothing is traced any more: exit non-zero so that the service
      // manager (Restart=on-failure) starts a fresh daemon.
      log::error("tracer rebuild failed, stopping: {}", s.error().message);
      exit_code_ = kExitCannotTrace;
      g_stop.store(true);
    }
  } else if (mode_changes && window_open_) {
    if (reader_) (void)reader_->drain();
    pipe_.flush();
    close_window(monotonic_ns(), "level_change");
  }
}

void Daemon::on_record(const void* data, size_t len) {
  uint64_t ts = 0;
  if (len >= sizeof(st_event_header)) {
    st_event_header h;
    std::memcpy(&h, data, sizeof(h));
    ts = h.ts_ns;
  }
  flight_.append(ts, data, len);
  pipe_.push(data, len);
}

}  // namespace steptrace::daemon
