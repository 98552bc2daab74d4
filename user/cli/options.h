// SPDX-License-Identifier: Apache-2.0
// Command line -> validated Options. Pure: no I/O besides what CLI11 prints
// for --help, so every rule here is unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace {

enum class CommandKind { run, attach, check, record, report, top, diff };

struct TargetSpec {
  std::vector<uint32_t> pids;  // attach -p
  std::string cgroup_path;     // attach --cgroup
  bool all = false;            // attach --all
  std::string pod;             // attach --pod NAME|NAMESPACE/NAME|UID: resolved to its cgroup at start
  std::string container;       // attach --container ID (a prefix of 12+ hex digits)
};

struct Options {
  CommandKind command = CommandKind::check;
  std::vector<std::string> argv;         // run: the job to launch
  TargetSpec target;
  std::vector<std::string> accel_devs;   // --accel-dev PATH (device or simulated device file)
  std::vector<std::string> rdma_devs;    // --rdma-dev PATH (uverbs file, real or simulated)
  double duration_s = 0;                 // 0: until the job exits or SIGINT/SIGTERM
  double kill_after_s = 10;              // --kill-after: a stopped job's grace before SIGKILL
  bool keep_running = false;             // --keep-running: a stop ends tracing, the job runs on
  bool subreaper = false;                // the CLI made steptrace the child subreaper (not a flag)
  // Ring buffer size, a power of two. Small enough to stay in the CPUs'
  // cache: every record is written to the next place in the ring, and a
  // 64 MiB ring made each one a write miss (B13: ~100 ns more per record
  // than 1-16 MiB on this VM). A fold no longer leaves it unread (the ring
  // keeper drains meanwhile), and a burst that fills a quarter of it wakes
  // the drain early (st_cfg.ring_wake_bytes). 8 MiB holds ~130 k records.
  uint32_t ring_mib = 8;
  // Timer drain interval (no per-record wake-ups). 100 ms: a burst wakes the
  // drain early (ring_wake_pct), and the device counters keep their own 10 ms
  // clock, so the only cost of a longer interval is latency nobody reads; each
  // wake-up can put steptrace between two of the job's slices (bench B10).
  uint32_t drain_ms = 100;
  uint32_t ring_wake_pct = 25;           // a record past this fill wakes the drain early (0: timer only)
  std::string sched = "batch";           // --sched: steptrace's own threads' policy (session/tracer_scheduling.h)
  uint32_t subsystems = 0;               // st_subsystem bits
  uint32_t sample_hz = 49;               // --sample-hz: stack samples per CPU per second (0: off)
  bool follow_forks = true;
  bool allow_kprobes = true;             // --no-kprobes: tracepoint tiers only
  bool syscall_events = true;            // --raw-syscall-hooks: false
  std::vector<std::string> runtime_libs; // --runtime-lib PATH: libnrt (or marker) to probe up front
  bool discover_libs = true;             // scan traced processes' maps for libnrt / the step marker
  std::string btf_path;                  // --btf FILE when /sys/kernel/btf/vmlinux is missing
  std::string sysfs_root = "/sys";       // --sysfs-root: Neuron sysfs metrics and EFA counters live under it
  std::string dev_root = "/dev";         // --dev-root: Neuron device files (neuronN) for the datastore
  bool device_counters = true;           // --no-device-counters: no NDS/EFA/sysfs sampling
  std::string json_path;                 // --json FILE|-
  std::string perfetto_path;             // --perfetto FILE: Chrome trace-event JSON for ui.perfetto.dev
  std::string html_path;                 // --html FILE: self-contained HTML report
  std::string folded_path;               // --folded FILE: on-CPU stacks, folded (flamegraph.pl, speedscope)
  bool force = false;                    // --force: report files (and captures) may replace an existing file
  uint32_t output_mode = 0600;           // --output-mode: permission bits of the files written
  bool no_color = false;                 // --no-color (colour is used only on a TTY anyway)
  double top_interval_s = 1.0;           // top: refresh interval
  std::string job_output;                // --job-output FILE: the launched job's stdout and stderr (appended)
  std::string record_path;               // record -o FILE: raw events to a capture file
  uint64_t max_capture_bytes = 0;        // record --max-size: 0 = no cap
  std::string capture_path;              // report FILE
  std::vector<std::string> more_captures;  // report A B ...: the captures after the first (one job across hosts)
  std::vector<std::string> diff_paths;   // diff A B: captures or JSON reports
  double fail_if_slower_pct = -1;        // diff --fail-if-slower PCT: exit 1 past it (-1: never)
  // report --time FROM-TO (seconds after the capture's first record) / --steps A-B (step indexes);
  // -1: not given.
  double cut_from_s = -1, cut_to_s = -1;
  int64_t cut_first_step = -1, cut_last_step = -1;
  double window_s = 10;                  // --window: fold every this many seconds of trace (0: only at the cap)
  uint64_t max_memory_bytes = 1ull << 30; // --max-memory: the analysis' memory cap (0: none)
  uint32_t keep_steps = 4096;            // --keep-steps: steps per rank kept in detail
  double hang_after_s = 5;               // --hang-after: a hang is no step ended for max(this, 10 x p99) s (0: off)
  int verbose = 0;
  uint32_t max_targets = 0;              // tests only (no flag): entries of the BPF target set, 0 = default
  uint32_t max_socks = 0;                // tests only (no flag): entries of the BPF socket LRU, 0 = default
};

// argv[0] included. On --help/--version, returns an Error whose message is
// empty and sets *exit_code (0); on bad input, an Error with the reason.
Result<Options> parse_options(int argc, const char* const* argv, int* exit_code);

// "1,2,3" -> {1,2,3}; rejects empty items, zero and non-numbers.
Result<std::vector<uint32_t>> parse_pid_csv(const std::string& s);
// "512k", "64m", "2g" (powers of 1024; a plain number is bytes) -> bytes.
Result<uint64_t> parse_size(const std::string& s);
// "sched,block" -> bits; "all" -> everything.
Result<uint32_t> parse_subsystems(const std::string& s);

}  // namespace steptrace
