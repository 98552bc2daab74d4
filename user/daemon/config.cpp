// SPDX-License-Identifier: Apache-2.0
#include "daemon/config.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <toml.hpp>

#include "cli/options.h"
#include "daemon/budget.h"
#include "util/sys_root.h"

namespace steptrace::daemon {

namespace {

void add_flags(CLI::App& app, DaemonConfig& c) {
  app.add_option("-c,--config", c.config_path, "Configuration file (TOML)")
      ->each([&c](const std::string&) { c.config_explicit = true; });
  app.add_option("--listen", c.listen,
                 "HOST:PORT for the Prometheus endpoint (default 127.0.0.1:19464; anything else is an explicit choice, e.g. "
                 "the pod IP in Kubernetes)");
  app.add_option("--control-socket", c.control_socket,
                 "Unix socket for `steptrace ctl` (default /run/steptrace/control.sock; root and the daemon's user "
                 "only; \"none\" turns it off)");
  app.add_option("--max-cpu", c.max_cpu_percent, "CPU budget in percent of one core (userspace + BPF run time)");
  app.add_option("--bpf-stats-every", c.bpf_stats_every_s,
                 "BPF run-time statistics (the BPF half of --max-cpu) on one second in this many, where the daemon "
                 "turns them on itself (CAP_SYS_ADMIN): while on, every BPF program on the host runs two clock reads "
                 "slower (default 10; 1: always on)");
  app.add_option("--degrade-level", c.degrade_level,
                 "Start at this level of the degradation ladder (full, slow_drain, sampled, aggregated, no_net, "
                 "no_block, no_sched, paused) and never recover past it");
  app.add_option("--sample-every", c.sample_every,
                 "Level sampled: per-event sched/net/block detail in 1 of every N analysis windows");
  app.add_option("--window", c.window_s, "Analysis window in seconds (steps crossing a window edge are cut)");
  app.add_option("--scan-ms", c.scan_ms, "Discovery interval: scan /proc/*/fd for accelerator users");
  app.add_option("--drain-ms", c.drain_ms,
                 "Ring buffer drain interval in ms (default 100; a ring a quarter full wakes it at once; idle: 500 ms, "
                 "woken by the next record)");
  app.add_flag("--device-counters,!--no-device-counters", c.device_counters,
               "Sample the Neuron datastore of each traced rank, EFA port counters and Neuron sysfs metrics (default on)");
  app.add_option("--sysfs-root", c.sysfs_root, "Root of sysfs for Neuron metrics and EFA counters (tests use a fake tree)");
  app.add_option("--dev-root", c.dev_root, "Directory holding the Neuron device files neuronN, for the datastore counters");
  app.add_option("--sched", c.sched,
                 "The daemon's own scheduling policy: batch (default: its wake-ups never preempt the job's threads) "
                 "or normal (SCHED_OTHER)");
  app.add_option("--ring-mib", c.ring_mib, "Ring buffer size in MiB (power of two)");
  app.add_option("--collectors", c.collectors, "Comma list: sched,block,net,accel,uprobe,steal,all");
  app.add_option("--accel-dev", c.accel_devs, "Accelerator device file (repeatable; Neuron devices are found by major)");
  app.add_option("--rdma-dev", c.rdma_devs,
                 "RDMA verbs file whose calls (EFA control path) are traced (repeatable; uverbs devices are found by "
                 "major)");
  app.add_option("--runtime-lib", c.runtime_libs, "Neuron runtime library to probe up front (repeatable)");
  app.add_option("--btf", c.btf_path, "Kernel BTF file when /sys/kernel/btf/vmlinux is missing");
  app.add_option("--host", c.host, "host label (default: the hostname)");
  app.add_option("--cgroup", c.cgroup,
                 "Trace only processes in this cgroup or below it: its directory (/sys/fs/cgroup/...) or the path "
                 "/proc/PID/cgroup shows (e.g. /kubepods/burstable/pod<uid>)");
  app.add_option("--flight-seconds", c.flight_seconds, "Flight recorder: seconds of raw events kept in memory");
  app.add_option("--flight-mib", c.flight_mib, "Flight recorder: memory cap in MiB");
  app.add_option("--dump-dir", c.dump_dir, "Directory for flight-recorder captures");
  app.add_flag("--auto-dump,!--no-auto-dump", c.auto_dump, "Dump automatically when a step exceeds p99 x factor");
  app.add_option("--auto-dump-factor", c.auto_dump_factor, "Automatic dump threshold as a multiple of p99");
  app.add_option("--hang-after", c.hang_after_s,
                 "A hang is no step ended for max(S, 10 x the step p99) seconds: logged, exported and dumped (0: off)");
  app.add_option("--dump-min-interval", c.dump_min_interval_s,
                 "Minimum seconds between two automatic dumps, and between two requested ones (SIGUSR1, ctl dump)");
  app.add_option("--max-processes", c.max_processes, "Cap on tracked accelerator processes");
  app.add_option("--max-window-events", c.max_window_events, "A window closes early after this many events");
  app.add_option("--max-series", c.max_series, "Cap on per-rank metric series");
  // Tests only (not in --help): shrink the kernel's target set to fill it.
  app.add_option("--max-targets", c.max_targets, "")->group("");
  app.add_flag("-v,--verbose", c.verbose, "More output (repeat for libbpf debug)");
}

template <typename T>
T get_number(const toml::value& v, const std::string& key) {
  if (v.is_integer()) return static_cast<T>(v.as_integer());
  if (v.is_floating()) {
    if constexpr (std::is_integral_v<T>) throw std::runtime_error(fmt::format("{}: expected an integer", key));
    return static_cast<T>(v.as_floating());
  }
  throw std::runtime_error(fmt::format("{}: expected a number", key));
}

}  // namespace

Result<Ok> parse_daemon_flags(int argc, const char* const* argv, DaemonConfig& into, int* exit_code) {
  CLI::App app{"steptrace daemon: trace every accelerator job on this host, export Prometheus metrics"};
  app.name("steptrace daemon");
  add_flags(app, into);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    *exit_code = app.exit(e, out, err);
    if (*exit_code == 0) {
      fmt::print("{}", out.str());
      return make_error("");
    }
    *exit_code = 2;  // a usage error, as bcc/perf tools exit (not CLI11's own 105/106/114)
    std::string msg = err.str().empty() ? e.what() : err.str();
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return make_error(msg);
  }
  return Ok{};
}

Result<Ok> apply_config_toml(const std::string& text, const std::string& origin, DaemonConfig& c) {
  try {
    std::istringstream is(text);
    const toml::value data = toml::parse(is, origin);
    using Setter = std::function<void(const toml::value&, const std::string&)>;
    auto str = [](std::string& dst) -> Setter {
      return [&dst](const toml::value& v, const std::string&) { dst = v.as_string().str; };
    };
    auto strs = [](std::vector<std::string>& dst) -> Setter {
      return [&dst](const toml::value& v, const std::string&) {
        dst.clear();
        for (const auto& e : v.as_array()) dst.push_back(e.as_string().str);
      };
    };
    auto dbl = [](double& dst) -> Setter {
      return [&dst](const toml::value& v, const std::string& k) { dst = get_number<double>(v, k); };
    };
    auto u32 = [](uint32_t& dst) -> Setter {
      return [&dst](const toml::value& v, const std::string& k) {
        auto n = get_number<int64_t>(v, k);
        if (n < 0 || n > UINT32_MAX) throw std::runtime_error(fmt::format("{}: out of range", k));
        dst = static_cast<uint32_t>(n);
      };
    };
    const std::map<std::string, Setter> keys = {
        {"listen", str(c.listen)},
        {"control_socket", str(c.control_socket)},
        {"max_cpu_percent", dbl(c.max_cpu_percent)},
        {"bpf_stats_every_s", u32(c.bpf_stats_every_s)},
        {"degrade_level", str(c.degrade_level)},
        {"sample_every", u32(c.sample_every)},
        {"window_seconds", dbl(c.window_s)},
        {"scan_ms", u32(c.scan_ms)},
        {"drain_ms", u32(c.drain_ms)},
        {"sched", str(c.sched)},
        {"device_counters", [&c](const toml::value& v, const std::string&) { c.device_counters = v.as_boolean(); }},
        {"sysfs_root", str(c.sysfs_root)},
        {"dev_root", str(c.dev_root)},
        {"ring_mib", u32(c.ring_mib)},
        {"collectors", str(c.collectors)},
        {"accel_devs", strs(c.accel_devs)},
        {"rdma_devs", strs(c.rdma_devs)},
        {"runtime_libs", strs(c.runtime_libs)},
        {"btf", str(c.btf_path)},
        {"host", str(c.host)},
        {"cgroup", str(c.cgroup)},
        {"flight_recorder_seconds", dbl(c.flight_seconds)},
        {"flight_recorder_mib", u32(c.flight_mib)},
        {"dump_dir", str(c.dump_dir)},
        {"auto_dump", [&c](const toml::value& v, const std::string&) { c.auto_dump = v.as_boolean(); }},
        {"auto_dump_factor", dbl(c.auto_dump_factor)},
        {"dump_min_interval_seconds", dbl(c.dump_min_interval_s)},
        {"hang_after_seconds", dbl(c.hang_after_s)},
        {"max_processes", u32(c.max_processes)},
        {"max_window_events",
         [&c](const toml::value& v, const std::string& k) {
           auto n = get_number<int64_t>(v, k);
           if (n <= 0) throw std::runtime_error(fmt::format("{}: must be positive", k));
           c.max_window_events = static_cast<uint64_t>(n);
         }},
        {"max_series", u32(c.max_series)},
        {"verbose", [&c](const toml::value& v, const std::string& k) { c.verbose = get_number<int>(v, k); }},
    };
    for (const auto& [k, v] : data.as_table()) {
      auto it = keys.find(k);
      if (it == keys.end()) return make_error(fmt::format("{}: unknown key '{}'", origin, k));
      try {
        it->second(v, k);
      } catch (const toml::type_error&) {
        return make_error(fmt::format("{}: '{}' has the wrong type", origin, k));
      }
    }
  } catch (const std::exception& e) {
    std::string msg = e.what();
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return make_error(fmt::format("{}: {}", origin, msg));
  }
  return Ok{};
}

Result<std::pair<std::string, int>> split_listen(const std::string& s) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= s.size())
    return make_error(fmt::format("listen address '{}': expected HOST:PORT", s));
  std::string host = s.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    return make_error(fmt::format("listen address '{}': bad port", s));
  }
  if (port <= 0 || port > 65535) return make_error(fmt::format("listen address '{}': port out of range", s));
  return std::make_pair(host, port);
}

Result<Ok> validate(const DaemonConfig& c) {
  if (auto l = split_listen(c.listen); !l) return l.error();
  if (control_socket_enabled(c) && (c.control_socket.front() != '/' || c.control_socket.size() >= 108))
    return make_error(fmt::format("control_socket '{}': an absolute path shorter than 108 bytes, or \"none\"",
                                  c.control_socket));
  if (!(c.max_cpu_percent > 0 && c.max_cpu_percent <= 100 * 1024))
    return make_error(fmt::format("max_cpu_percent {} must be > 0", c.max_cpu_percent));
  if (level_by_name(c.degrade_level) < 0) {
    std::string names;
    for (const auto& l : kLevels) names += (names.empty() ? "" : ", ") + std::string(l.name);
    return make_error(fmt::format("degrade_level '{}': expected one of {}", c.degrade_level, names));
  }
  if (c.sample_every < 1 || c.sample_every > 1000) return make_error("sample_every must be within 1..1000");
  if (c.bpf_stats_every_s < 1 || c.bpf_stats_every_s > 3600)
    return make_error("bpf_stats_every_s must be within 1..3600");
  if (!(c.window_s >= 1 && c.window_s <= 3600)) return make_error("window_seconds must be within 1..3600");
  if (c.scan_ms < 50 || c.scan_ms > 60'000) return make_error("scan_ms must be within 50..60000");
  if (c.drain_ms < 1 || c.drain_ms > 1000) return make_error("drain_ms must be within 1..1000");
  if (c.sched != "batch" && c.sched != "normal")
    return make_error(fmt::format("sched '{}': expected batch or normal", c.sched));
  if (c.ring_mib == 0 || c.ring_mib > 1024 || (c.ring_mib & (c.ring_mib - 1)))
    return make_error(fmt::format("ring_mib {} must be a power of two up to 1024", c.ring_mib));
  if (auto s = parse_subsystems(c.collectors); !s) return s.error();
  if (!(c.flight_seconds >= 0 && c.flight_seconds <= 3600)) return make_error("flight_recorder_seconds must be within 0..3600");
  if (c.flight_mib > 4096) return make_error("flight_recorder_mib must be at most 4096");
  if (!(c.auto_dump_factor >= 1)) return make_error("auto_dump_factor must be >= 1");
  if (!(c.dump_min_interval_s >= 0)) return make_error("dump_min_interval_seconds must be >= 0");
  if (!(c.hang_after_s >= 0 && c.hang_after_s <= 86400)) return make_error("hang_after_seconds must be within 0..86400");
  if (c.max_processes == 0 || c.max_series == 0) return make_error("max_processes and max_series must be positive");
  if (c.dump_dir.empty() || c.dump_dir.front() != '/') return make_error("dump_dir must be an absolute path");
  if (!c.cgroup.empty() && (c.cgroup.front() != '/' || c.cgroup.find('\n') != std::string::npos))
    return make_error(fmt::format("cgroup '{}': a path as /proc/PID/cgroup shows it, starting with /", c.cgroup));
  return Ok{};
}

Result<DaemonConfig> load_config(int argc, const char* const* argv, int* exit_code) {
  // Pass 1: flags only, to learn --config.
  DaemonConfig probe;
  if (auto r = parse_daemon_flags(argc, argv, probe, exit_code); !r) return r.error();
  DaemonConfig c;
  c.config_path = probe.config_path;
  c.config_explicit = probe.config_explicit;
  auto text = read_small_file(c.config_path, 1 << 20);
  if (text) {
    if (auto r = apply_config_toml(*text, c.config_path, c); !r) return r.error();
  } else if (c.config_explicit) {
    return make_error(fmt::format("cannot read config file {}", c.config_path));
  }
  // Pass 2: flags over the file.
  if (auto r = parse_daemon_flags(argc, argv, c, exit_code); !r) return r.error();
  if (auto r = validate(c); !r) return r.error();
  *exit_code = 0;
  return c;
}

}  // namespace steptrace::daemon
