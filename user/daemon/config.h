// SPDX-License-Identifier: Apache-2.0
// `steptrace daemon` configuration: built-in defaults, then the TOML file
// (/etc/steptrace/steptrace.toml), then command-line flags, which always win.
// SIGHUP repeats the same three steps, so a flag given at start keeps
// overriding the file across reloads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace::daemon {

inline constexpr const char* kDefaultConfigPath = "/etc/steptrace/steptrace.toml";
// The metrics port: not 9464 (the OpenTelemetry Prometheus exporter's default,
// which a training job's own exporter may hold) and on no entry of the
// Prometheus "default port allocations" list (steptrace.8, PORT).
inline constexpr const char* kDefaultListen = "127.0.0.1:19464";

struct DaemonConfig {
  std::string config_path = kDefaultConfigPath;
  bool config_explicit = false;        // --config given: a missing file is an error
  std::string listen = kDefaultListen;
  // Unix socket for `steptrace ctl` (root and the daemon's uid only); "" or "none" = off.
  std::string control_socket = "/run/steptrace/control.sock";
  double max_cpu_percent = 1.0;        // of one core: userspace + BPF run time
  // BPF run-time statistics on one second in this many where the daemon
  // holds them (CAP_SYS_ADMIN; daemon/bpf_stats_duty.h); 1 = always on.
  uint32_t bpf_stats_every_s = 10;
  std::string degrade_level = "full";  // start at this level of the ladder, never recover past it
  uint32_t sample_every = 4;           // level sampled: per-event detail in 1 of this many windows
  double window_s = 10;                // analysis window (steps crossing an edge are cut)
  uint32_t scan_ms = 1000;             // /proc/*/fd discovery interval
  uint32_t drain_ms = 100;             // and at once when the ring is a quarter full (kRingWakeFill)
  // Device counters (signals/device_signals.h): the Neuron datastore of each
  // traced rank, EFA port counters, Neuron sysfs metrics; in the analysis and
  // in flight-recorder dumps.
  bool device_counters = true;
  std::string sysfs_root = "/sys";
  std::string dev_root = "/dev";
  std::string sched = "batch";         // the daemon's own policy (session/tracer_scheduling.h)
  uint32_t ring_mib = 16;
  std::string collectors = "all";
  std::vector<std::string> accel_devs;
  std::vector<std::string> rdma_devs;  // uverbs files (EFA control path); real ones are found by major
  std::vector<std::string> runtime_libs;
  std::string btf_path;
  std::string host;                    // label; "" = gethostname()
  // Only processes in this cgroup or below it: a cgroup directory
  // (/sys/fs/cgroup/...) or the path as /proc/PID/cgroup shows it, any
  // hierarchy. One daemon per pod, or per simulated node. "" = every process.
  std::string cgroup;
  // Flight recorder.
  double flight_seconds = 30;
  uint32_t flight_mib = 32;
  std::string dump_dir = "/var/lib/steptrace";
  bool auto_dump = true;
  double auto_dump_factor = 3.0;       // a step longer than p99 x this triggers a dump
  double hang_after_s = 30;            // a hang: no step ended for max(this, 10 x p99) s (0: off)
  // At most one automatic (slow-step) dump per this many seconds, and at most
  // one requested (SIGUSR1, steptrace ctl dump) dump: two limits, counted apart.
  double dump_min_interval_s = 300;
  // Hard caps (memory stays bounded however long the daemon runs).
  uint32_t max_processes = 4096;       // tracked accelerator processes
  uint32_t max_targets = 0;            // tests (hidden --max-targets): kernel target set entries, 0 = default
  uint64_t max_window_events = 4'000'000;  // a window closes early at this many events
  uint32_t max_series = 512;           // per-rank metric series kept
  int verbose = 0;
};

// Parses the daemon's flags into `into` (only flags that are present are
// written). argv[0] is "daemon". --help sets *exit_code 0 and returns an empty Error.
Result<Ok> parse_daemon_flags(int argc, const char* const* argv, DaemonConfig& into, int* exit_code);

// Applies a TOML document (text) onto `into`. Unknown keys and wrong types are errors.
Result<Ok> apply_config_toml(const std::string& text, const std::string& origin, DaemonConfig& into);

// Defaults -> file -> flags. The file is optional unless --config was given.
Result<DaemonConfig> load_config(int argc, const char* const* argv, int* exit_code);

// The control socket is on unless control_socket is "" or "none".
inline bool control_socket_enabled(const DaemonConfig& c) {
  return !c.control_socket.empty() && c.control_socket != "none";
}

// Checks ranges and formats ("HOST:PORT").
Result<Ok> validate(const DaemonConfig& c);
// "127.0.0.1:19464" -> host, port; "[::1]:19464" too.
Result<std::pair<std::string, int>> split_listen(const std::string& s);

}  // namespace steptrace::daemon
