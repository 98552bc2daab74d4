// SPDX-License-Identifier: Apache-2.0
#include "daemon/daemon_impl.h"

#include <bpf/bpf.h>
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "daemon/daemon.h"
#include "session/tracer_scheduling.h"
#include "util/log.h"
#include "util/sys_root.h"

namespace steptrace::daemon {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
std::atomic<bool> g_dump{false};

namespace {

void on_stop(int) { g_stop.store(true); }
void on_hup(int) { g_reload.store(true); }
void on_usr1(int) { g_dump.store(true); }

}  // namespace

Daemon::~Daemon() = default;

Status Daemon::start() {
  host_ = cfg_.host.empty() ? hostname() : cfg_.host;
  pipe_.set_observer([this](const st_event_header& h, const void* d, size_t n) { on_raw_record(h, d, n); });
  features_ = probe_features(cfg_.btf_path);
  if (auto st = check_preflight(features_); !st) return make_error("cannot trace: " + st.error().message);
  // The stack sampler is a session feature for now: the daemon has no
  // symbolizer and no profile in its metrics, so samples would be cost alone.
  base_subsystems_ = *parse_subsystems(cfg_.collectors) & ~static_cast<uint32_t>(ST_SUB_SAMPLE);
  host_devices_ = find_host_devices(SysRoot());
  apply_runtime_config();
  // A configured floor: start there (a cheap mode from the first window).
  budget_.set_floor(level_by_name(cfg_.degrade_level));
  enter_level(budget_.level());
  cycle_.restart();
  if (budget_.level() > 0)
    log::info("starting at degradation level {} '{}' (degrade_level): {}", budget_.level(),
              kLevels[budget_.level()].name, kLevels[budget_.level()].what);

  // BPF run-time statistics: the kernel counts while this fd is open
  // (BPF_ENABLE_STATS needs CAP_SYS_ADMIN), one second in bpf_stats_every_s
  // (daemon/bpf_stats_duty.h), or while kernel.bpf_stats_enabled=1 (the
  // systemd unit's ExecStartPre sets it), all the time. With neither, the CPU
  // budget sees only userspace: say so loudly (steptrace_bpf_stats_enabled is 0).
  const int stats_errno = stats_.start(cfg_.bpf_stats_every_s);
  if (stats_.owned() && stats_.cycling())
    log::info("BPF run-time statistics: on one second in {} (BPF_ENABLE_STATS; their own reads: {:.0f} ns a run)",
              cfg_.bpf_stats_every_s, stats_.floor_ns());
  else if (stats_.owned()) log::info("BPF run-time statistics: on (BPF_ENABLE_STATS)");
  else if (bpf_stats_enabled()) log::info("BPF run-time statistics: on (kernel.bpf_stats_enabled=1)");
  else
    log::warn("BPF run-time statistics are OFF: BPF_ENABLE_STATS failed ({}) and kernel.bpf_stats_enabled is 0. The "
              "CPU budget (--max-cpu) counts only userspace, not the BPF programs' run time. Fix: `sysctl -w "
              "kernel.bpf_stats_enabled=1` before the daemon starts (the shipped systemd unit does) or CAP_SYS_ADMIN",
              std::strerror(stats_errno));

  start_device_signals();  // before the tracer: its first window's analysis reads it
  if (auto s = build_tracer(); !s) return s;
  if (auto s = prepare_dump_dir(); !s) log::warn("{}", s.error().message);
  else remove_stale_dump_temps(cfg_.dump_dir);  // captures a crash cut short
  dump_worker_.start();

  auto listen = split_listen(cfg_.listen);
  if (!listen) return listen.error();
  if (listen->first != "127.0.0.1" && listen->first != "::1" && listen->first != "localhost")
    log::warn("metrics endpoint listens on {} (not loopback): anyone who can reach it can read the metrics (host, "
              "job and process names); restrict it with a firewall or a NetworkPolicy",
              cfg_.listen);
  publish_metrics();  // the first scrape sees the tracer as built, never an empty page
  if (auto st = http_.start(listen->first, listen->second, cfg_.listen); !st) return st;
  log::info("serving Prometheus metrics on http://{}/metrics (read-only)", cfg_.listen);
  if (control_socket_enabled(cfg_)) {
    if (auto st = control_.start(cfg_.control_socket); !st) return st;
    log::info("control socket {} (root and uid {} only): steptrace ctl dump|reload|level", cfg_.control_socket,
              ::geteuid());
  } else {
    log::info("control socket disabled (control_socket = \"{}\"): dumps only on SIGUSR1 and slow steps",
              cfg_.control_socket);
  }
  return Ok{};
}

bool Daemon::bpf_stats_enabled() const { return stats_.available(); }

void Daemon::publish_metrics() {
  render_metrics();
  // The control path's families (control.cpp), served after metrics.cpp's.
  Exposition x;
  render_control_metrics(x);
  http_.set_extra_metrics(x.text());
}

void Daemon::apply_runtime_config() {
  log::set_level(cfg_.verbose >= 2 ? log::Level::debug : cfg_.verbose == 1 ? log::Level::info : log::Level::warn);
  // Info is the floor for a daemon: journald keeps what it says.
  if (log::level() < log::Level::info) log::set_level(log::Level::info);
  budget_.set_budget(cfg_.max_cpu_percent);
  hang_.set_floor(cfg_.hang_after_s);
  flight_.configure(static_cast<uint64_t>(cfg_.flight_seconds * 1e9), static_cast<uint64_t>(cfg_.flight_mib) << 20);
  std::vector<std::string> paths;
  for (const auto& p : cfg_.accel_devs) {
    std::error_code ec;
    auto canon = std::filesystem::weakly_canonical(p, ec);
    paths.push_back(ec ? p : canon.string());
  }
  scanner_.set_accel_paths(std::move(paths));
  scanner_.set_cgroup_scope(
      cfg_.cgroup.empty() ? "" : cgroup_scope_path(cfg_.cgroup, read_small_file("/proc/self/mounts", 1 << 20).value_or("")));
}

Status Daemon::reload() {
  int code = 0;
  auto c = load_config(argc_, argv_, &code);
  if (!c) {
    ++reload_err_;
    log::error("reload failed, keeping the running configuration: {}", c.error().message);
    return make_error("reload failed, keeping the running configuration: " + c.error().message);
  }
  if (c->listen != cfg_.listen || c->ring_mib != cfg_.ring_mib || c->btf_path != cfg_.btf_path ||
      c->collectors != cfg_.collectors || c->accel_devs != cfg_.accel_devs || c->rdma_devs != cfg_.rdma_devs ||
      c->control_socket != cfg_.control_socket)
    log::warn("reload: listen, ring_mib, btf, collectors, accel_devs, rdma_devs and control_socket take effect at "
              "restart");
  DaemonConfig keep = cfg_;
  cfg_ = *c;
  cfg_.listen = keep.listen;
  cfg_.control_socket = keep.control_socket;
  cfg_.ring_mib = keep.ring_mib;
  cfg_.btf_path = keep.btf_path;
  cfg_.collectors = keep.collectors;
  cfg_.accel_devs = keep.accel_devs;
  cfg_.rdma_devs = keep.rdma_devs;
  apply_runtime_config();
  stats_.set_every(cfg_.bpf_stats_every_s);
  if (budget_.set_floor(level_by_name(cfg_.degrade_level))) apply_level(budget_.level(), "degrade_level raised");
  else enter_level(budget_.level());
  ++reload_ok_;
  log::info("configuration reloaded from {} (max_cpu {}%, window {} s, flight recorder {} s / {} MiB)", cfg_.config_path,
            cfg_.max_cpu_percent, cfg_.window_s, cfg_.flight_seconds, cfg_.flight_mib);
  return Ok{};
}

// Every drain_ms_ while records come; after a second of none, the idle
// interval (the next record wakes it, as in a session: loader/drain_wait.h);
// never past the next discovery scan or window edge. (The device counters
// keep their own clock: signals/sampler_thread.h.)
void Daemon::sleep_before_drain() {
  if (reader_ && reader_->more()) return;  // a drain cut short at its bound (a storm) goes on at once
  if (!wait_ || !tracer_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(drain_ms_));
    return;
  }
  if (wait_->next_is_idle(last_drained_)) {
    tracer_->set_consumer_idle(true);
    // Records that came between the last drain and the flag woke nobody.
    if (auto n = reader_->drain(); n && *n > 0) {
      tracer_->set_consumer_idle(false);
      last_drained_ = *n;
      wait_->next_is_idle(*n);
      return;
    }
  }
  uint64_t deadline = next_discover_ns_;
  if (window_open_) deadline = std::min(deadline, window_start_ns_ + static_cast<uint64_t>(cfg_.window_s * 1e9));
  wait_->sleep(std::max<uint64_t>(deadline, 1));
  tracer_->set_consumer_idle(false);
}

int Daemon::run() {
  uint64_t next_second = 0;
  publish_metrics();
  while (!g_stop.load()) {
    sleep_before_drain();
    if (g_reload.exchange(false)) (void)reload();
    uint64_t now = monotonic_ns();
    if (reader_) {
      auto n = reader_->drain();
      if (!n) {
        log::error("ring buffer: {}", n.error().message);
        return kExitCannotTrace;
      }
      last_drained_ = *n;
      if (tracer_) (void)tracer_->rearm_fill_wakeup();  // the next quarter-full ring wakes the drain again
      pipe_.advance();
      if (window_detail_) check_hang(now);
    }
    tick_device_signals();
    if (now >= next_discover_ns_) {
      discover();
      next_discover_ns_ = now + static_cast<uint64_t>(cfg_.scan_ms) * 1'000'000ull;
    }
    if (!lib_scan_.empty()) scan_for_libs();
    flight_.evict(now);
    keep_clock_anchor(now);
    handle_dumps();
    handle_control();
    if (pipe_.window_records() >= cfg_.max_window_events) {
      ++cap_hits_["window_events"];
      close_window(now, "event_cap");
    } else if (window_open_ && now - window_start_ns_ >= static_cast<uint64_t>(cfg_.window_s * 1e9)) {
      close_window(now, "timer");
    }
    if (now >= next_second) {
      sample_cpu();
      publish_metrics();
      next_second = now + 1'000'000'000ull;
    }
  }
  log::info("stopping");
  if (auto o = dump_worker_.wait_outcome()) finish_dump(*o);  // a capture in hand is finished and answered
  control_.answer_all(false, "shutting down");  // anyone still waiting
  return exit_code_;
}

int daemon_main(int argc, char** argv) {
  int code = 0;
  auto cfg = load_config(argc, argv, &code);
  if (!cfg) {
    if (!cfg.error().message.empty()) fmt::print(stderr, "steptrace daemon: {}\n", cfg.error().message);
    return cfg.error().message.empty() ? code : 2;
  }
  // Before any thread exists: the daemon's threads inherit it (session/tracer_scheduling.h).
  set_tracer_sched(cfg->sched == "normal" ? TracerSched::normal : TracerSched::batch);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_hup;
  sigaction(SIGHUP, &sa, nullptr);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Daemon d(*cfg, argc, argv);
  log::set_level(log::Level::info);
  if (auto s = d.start(); !s) {
    log::error("{}", s.error().message);
    return kExitCannotTrace;
  }
  return d.run();
}

}  // namespace steptrace::daemon
