// SPDX-License-Identifier: Apache-2.0
#include "cli/options.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "steptrace_abi.h"
#include "util/text.h"
#include "util/version.h"

namespace steptrace {

Result<std::vector<uint32_t>> parse_pid_csv(const std::string& s) {
  std::vector<uint32_t> out;
  std::stringstream ss(s);
  std::string item;
  if (s.empty()) return make_error("empty pid list");
  while (std::getline(ss, item, ',')) {
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc{} || p != item.data() + item.size() || v == 0)
      return make_error(fmt::format("invalid pid '{}' (expected a positive number)", item));
    out.push_back(v);
  }
  if (!s.empty() && s.back() == ',') return make_error("invalid pid list: trailing comma");
  return out;
}

Result<uint64_t> parse_size(const std::string& s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  std::string_view rest(p, static_cast<size_t>(s.data() + s.size() - p));
  unsigned shift = 0;
  if (rest == "k" || rest == "K") shift = 10;
  else if (rest == "m" || rest == "M") shift = 20;
  else if (rest == "g" || rest == "G") shift = 30;
  else if (!rest.empty()) ec = std::errc::invalid_argument;
  if (s.empty() || ec != std::errc{} || p == s.data())
    return make_error(fmt::format("invalid size '{}' (a number of bytes, or with k, m or g: 512k, 64m, 2g)", s));
  if (v > (UINT64_MAX >> shift)) return make_error(fmt::format("size '{}' is too large", s));
  return v << shift;
}

Result<uint32_t> parse_subsystems(const std::string& s) {
  uint32_t bits = 0;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "sched") bits |= ST_SUB_SCHED;
    else if (item == "block") bits |= ST_SUB_BLOCK;
    else if (item == "net") bits |= ST_SUB_NET;
    else if (item == "accel") bits |= ST_SUB_ACCEL;
    else if (item == "uprobe") bits |= ST_SUB_UPROBE;
    else if (item == "steal") bits |= ST_SUB_STEAL;
    else if (item == "sample") bits |= ST_SUB_SAMPLE;
    else if (item == "all")
      bits |= ST_SUB_SCHED | ST_SUB_BLOCK | ST_SUB_NET | ST_SUB_ACCEL | ST_SUB_UPROBE | ST_SUB_STEAL | ST_SUB_SAMPLE;
    else
      return make_error(
          fmt::format("unknown collector '{}' (sched, block, net, accel, uprobe, steal, sample, all)", item));
  }
  if (bits == 0) return make_error("no collector selected");
  return bits;
}

namespace {

// Outputs every report-producing command shares (all rendered from one SessionReport).
void add_output_flags(CLI::App* app, Options& o) {
  app->add_option("--perfetto", o.perfetto_path, "Write a Chrome trace-event JSON trace for ui.perfetto.dev to FILE");
  app->add_option("--html", o.html_path, "Write a self-contained HTML report to FILE");
  app->add_option("--folded", o.folded_path,
                  "Write the on-CPU stack samples as folded stacks (category;frames... count) to FILE, for "
                  "flamegraph.pl and speedscope");
  app->add_flag("--no-color", o.no_color, "No colour in the terminal report (colour is only used on a TTY)");
  app->add_flag("--force", o.force,
                "Replace output files that exist (never through a symbolic link: one at an output path is refused)");
  app->add_option_function<std::string>(
         "--output-mode",
         [&o](const std::string& v) {
           unsigned long m = 0;
           size_t used = 0;
           try {
             m = std::stoul(v, &used, 8);
           } catch (const std::exception&) {
             used = 0;
           }
           if (used != v.size() || m > 0777) throw CLI::ValidationError("--output-mode", "an octal mode such as 0640");
           o.output_mode = static_cast<uint32_t>(m);
         },
         "Permission bits of the files written, in octal (default 0600)");
}

// "A-B" with 0 <= A, A <= B (A < B for times).
template <typename T>
std::optional<std::pair<T, T>> parse_range(const std::string& v) {
  auto dash = v.find('-', 1);
  if (dash == std::string::npos) return std::nullopt;
  T a{}, b{};
  try {
    size_t ua = 0, ub = 0;
    const std::string sa = v.substr(0, dash), sb = v.substr(dash + 1);
    if constexpr (std::is_floating_point_v<T>) {
      a = std::stod(sa, &ua);
      b = std::stod(sb, &ub);
    } else {
      a = std::stoll(sa, &ua);
      b = std::stoll(sb, &ub);
    }
    if (ua != sa.size() || ub != sb.size()) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!(a >= 0) || !(b >= a) || (std::is_floating_point_v<T> && !(b > a)) || !(b < T(1e12))) return std::nullopt;
  return std::pair{a, b};
}

// What attach, record and top trace, when they launch nothing.
void add_target_flags(CLI::App* app, Options& o, std::string& pid_csv) {
  app->add_option("-p,--pid", pid_csv, "PID[,PID...] (children are followed)");
  app->add_option("--cgroup", o.target.cgroup_path, "cgroup v2 directory");
  app->add_option("--pod", o.target.pod,
                  "Kubernetes pod on this node: NAME, NAMESPACE/NAME or its UID (resolved to the pod's cgroup)");
  app->add_option("--container", o.target.container,
                  "Container on this node by its id (12 or more hex digits of it; resolved to its cgroup)");
  app->add_flag("--all", o.target.all, "Every process on the host");
}

Status check_container_id(const std::string& id) {
  if (id.empty()) return Ok{};
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (id.size() < 12 || !std::all_of(id.begin(), id.end(), hex))
    return make_error(fmt::format("--container {}: give 12 or more lowercase hex digits of the container's id",
                                  host_string(id)));
  return Ok{};
}

int target_count(const Options& o, const std::string& pid_csv) {
  return (!pid_csv.empty()) + (!o.target.cgroup_path.empty()) + (!o.target.pod.empty()) +
         (!o.target.container.empty()) + (o.target.all ? 1 : 0);
}

// How a long session stays bounded (pipeline/analysis.h, WindowPolicy).
void add_window_flags(CLI::App* app, Options& o) {
  app->add_option("--window", o.window_s,
                  "Every this many seconds of trace, fold the steps that are over into per-rank totals and forget "
                  "their timeline, so memory stays bounded however long the session runs (default 10; a window whose "
                  "timeline passes 16 MiB folds sooner; 0: fold only at --max-memory)")
      ->check(CLI::Range(0.0, 86400.0));
  app->add_option_function<std::string>(
         "--max-memory",
         [&o](const std::string& s) {
           auto b = parse_size(s);
           if (!b) throw CLI::ValidationError("--max-memory", b.error().message);
           o.max_memory_bytes = *b;
         },
         "Cap on the analysis' memory (suffix k, m or g; default 1g): above it the window folds at once, and if "
         "the window alone is still above it, its detail is forgotten (its open steps are lost; the report counts "
         "it). 0: no cap")
      ->type_name("SIZE");
  app->add_option("--keep-steps", o.keep_steps,
                  "Steps of each rank kept in detail for the per-step table, JSON, Perfetto and HTML (the most "
                  "recent; totals and counts cover every step; default 4096)")
      ->check(CLI::Range(1u, 10'000'000u));
}

void add_trace_flags(CLI::App* app, Options& o, std::string& collectors, std::vector<std::string>& accel,
                     std::vector<std::string>& rdma) {
  app->add_option("-d,--duration", o.duration_s, "Stop after this many seconds")->check(CLI::PositiveNumber);
  app->add_option("--accel-dev", accel,
                  "Accelerator device file to trace (repeatable; matched on device+inode, so a simulated "
                  "device works). Real Neuron devices are found by their /proc/devices major without it.");
  app->add_option("--rdma-dev", rdma,
                  "RDMA verbs file (/dev/infiniband/uverbsN) whose calls - the EFA control path: queue pairs, memory "
                  "registrations - are shown as setup events (repeatable; matched on device+inode). Real uverbs "
                  "devices are found by the infiniband_verbs major without it.");
  app->add_option("--ring-mib", o.ring_mib, "Ring buffer size in MiB (power of two, default 8)")->check(CLI::Range(1, 1024));
  app->add_option("--drain-ms", o.drain_ms,
                  "Ring buffer drain interval in ms while records come (default 100; a ring --ring-wake-pct full wakes "
                  "it early; idle: 500 ms, woken by the next record; device counters keep their own 10 ms clock)")
      ->check(CLI::Range(1, 1000));
  app->add_option("--ring-wake-pct", o.ring_wake_pct,
                  "Wake the drain early when the ring is this full, in % (default 25; 0: drain only on the timer)")
      ->check(CLI::Range(0, 99));
  app->add_option("--collectors", collectors, "Comma list: sched,block,net,accel,uprobe,steal,sample,all");
  app->add_option("--sched", o.sched,
                  "steptrace's own scheduling policy: batch (default: its wake-ups never preempt the job's threads) or "
                  "normal (SCHED_OTHER); a policy steptrace was started under with chrt is kept")
      ->check(CLI::IsMember({"batch", "normal"}));
  app->add_option("--sample-hz", o.sample_hz,
                  "On-CPU stack samples per CPU per second for the 'in which code' profile (default 49; 0: off)")
      ->check(CLI::Range(0u, 1000u));
  app->add_option("--runtime-lib", o.runtime_libs,
                  "Neuron runtime library (libnrt.so) or step-marker library to probe; found automatically in the "
                  "traced processes' memory maps otherwise");
  app->add_flag("--no-discover", [&o](int64_t) { o.discover_libs = false; },
                "Do not scan traced processes for the runtime library");
  app->add_flag("--no-follow", [&o](int64_t) { o.follow_forks = false; }, "Do not follow forked children");
  app->add_flag("--no-kprobes", [&o](int64_t) { o.allow_kprobes = false; },
                "Use the tracepoint attach tiers even where kprobes exist (for comparison)");
  app->add_flag("--raw-syscall-hooks", [&o](int64_t) { o.syscall_events = false; },
                "Hook syscalls with the raw sys_enter/sys_exit tracepoints even where per-syscall events exist (for "
                "comparison: every syscall on the host then runs a program)");
  app->add_option("--btf", o.btf_path, "Kernel BTF file when /sys/kernel/btf/vmlinux is missing");
  app->add_option("--sysfs-root", o.sysfs_root,
                  "Root of sysfs for Neuron metrics and EFA counters (default /sys; tests use a fake tree)");
  app->add_option("--dev-root", o.dev_root,
                  "Directory holding the Neuron device files neuronN, for the datastore counters (default /dev)");
  app->add_flag("--no-device-counters", [&o](int64_t) { o.device_counters = false; },
                "Do not sample the Neuron datastore, EFA counters or Neuron sysfs metrics");
  app->add_option("--json", o.json_path, "Write the summary as JSON to FILE (- for stdout)");
  app->add_option("--hang-after", o.hang_after_s,
                  "Report a hang when no step has ended for max(S, 10 x the step p99) seconds: which ranks wait in "
                  "the collective and what the others are doing (default 5; 0: off)")
      ->check(CLI::Range(0.0, 86400.0));
  add_output_flags(app, o);
  add_window_flags(app, o);
}

// How a launched job (run, record -- CMD, top -- CMD) is stopped.
void add_job_flags(CLI::App* app, Options& o) {
  app->add_option("--job-output", o.job_output,
                  "Append the launched job's stdout and stderr to FILE (top: else they are discarded, to keep the "
                  "screen; --json -: else the job's stdout goes to stderr, to keep the JSON clean)");
  app->add_option("--kill-after", o.kill_after_s,
                  "When tracing is stopped (SIGINT/SIGTERM/SIGHUP/SIGQUIT to steptrace, the end of -d, q in top), "
                  "the signal (SIGTERM for -d and q) goes to the job's whole process tree; whatever is still alive "
                  "this many seconds later gets SIGKILL (default 10)")
      ->check(CLI::Range(0.0, 86400.0));
  app->add_flag("--keep-running", o.keep_running,
                "When tracing is stopped, leave the job running instead of stopping it");
}

// The command and its target from what CLI11 parsed; every cross-flag rule.
struct Parsed {
  CLI::App *run, *attach, *record, *report, *top, *diff, *app;
  // The words after the first "--", which CLI11 never sees: the job's own
  // (a vector option such as --accel-dev before the "--" made CLI11 take a
  // job's --duration 60 as steptrace's -d 60).
  std::optional<std::vector<std::string>> after_dashes;
};

// An option the subcommand does not know ends its options (the job's own
// flags may follow a bare command), so it would be taken for the command.
// No program is named like an option: say which one was not understood.
Status check_job_command(const std::vector<std::string>& argv) {
  if (argv.empty() || argv.front().size() < 2 || argv.front()[0] != '-') return Ok{};
  return make_error(fmt::format("unknown option '{}' (the job's command goes after --)", argv.front()));
}

// argv after the subcommand's options ("--" dropped): the job to launch.
std::vector<std::string> job_argv(CLI::App* sub, const Parsed& p) {
  auto argv = sub->remaining();
  if (argv.empty()) argv = p.app->remaining();
  if (!argv.empty() && argv.front() == "--") argv.erase(argv.begin());
  if (p.after_dashes) {
    // "run CMD -- ARGS": the "--" was the job's.
    if (!argv.empty()) argv.push_back("--");
    argv.insert(argv.end(), p.after_dashes->begin(), p.after_dashes->end());
  }
  return argv;
}

Status take_pids(Options& o, const std::string& pid_csv) {
  if (pid_csv.empty()) return Ok{};
  auto pids = parse_pid_csv(pid_csv);
  if (!pids) return pids.error();
  o.target.pids = *pids;
  return Ok{};
}

Status finish_options(Options& o, const Parsed& p, const std::string& pid_csv, const std::string& max_size,
                      const std::string& collectors, const std::vector<std::string>& accel,
                      const std::vector<std::string>& rdma) {
  if (p.run->parsed()) {
    o.command = CommandKind::run;
    o.argv = job_argv(p.run, p);
    if (o.argv.empty()) return make_error("run: missing command (steptrace run [opts] -- CMD ARGS...)");
    if (auto st = check_job_command(o.argv); !st) return st;
  } else if (p.record->parsed() || p.top->parsed()) {
    o.command = p.record->parsed() ? CommandKind::record : CommandKind::top;
    o.argv = job_argv(p.record->parsed() ? p.record : p.top, p);
    if (auto st = check_job_command(o.argv); !st) return st;
    int n = target_count(o, pid_csv) + (!o.argv.empty());
    if (n != 1)
      return make_error(fmt::format("{}: give exactly one of -p PID[,PID], --cgroup PATH, --pod P, --container ID, "
                                    "--all or -- CMD...",
                                    o.command == CommandKind::top ? "top" : "record"));
    if (auto st = take_pids(o, pid_csv); !st) return st;
    if (auto st = check_container_id(o.target.container); !st) return st;
    if (!max_size.empty()) {
      auto b = parse_size(max_size);
      if (!b) return make_error("--max-size: " + b.error().message);
      if (*b == 0) return make_error("--max-size: must be more than 0");
      o.max_capture_bytes = *b;
    }
  } else if (p.after_dashes) {
    return make_error("unexpected '--': only run, record and top take a command to launch");
  } else if (p.report->parsed()) {
    o.command = CommandKind::report;
    if (o.cut_from_s >= 0 && o.cut_first_step >= 0) return make_error("report: give --time or --steps, not both");
    if (!o.more_captures.empty() && !o.folded_path.empty())
      return make_error("report: several captures make a job report (terminal, --json, --perfetto and --html); "
                        "--folded takes one capture");
  } else if (p.diff->parsed()) {
    o.command = CommandKind::diff;
  } else if (!p.app->remaining().empty()) {
    return make_error(fmt::format("unexpected argument '{}'", p.app->remaining().front()));
  } else if (p.attach->parsed()) {
    o.command = CommandKind::attach;
    if (target_count(o, pid_csv) != 1)
      return make_error("attach: give exactly one of -p PID[,PID], --cgroup PATH, --pod P, --container ID or --all");
    if (auto st = take_pids(o, pid_csv); !st) return st;
    if (auto st = check_container_id(o.target.container); !st) return st;
  } else {
    o.command = CommandKind::check;
  }
  if (o.command != CommandKind::check && o.command != CommandKind::report && o.command != CommandKind::diff) {
    if ((o.ring_mib & (o.ring_mib - 1)) != 0)
      return make_error(fmt::format("--ring-mib {} is not a power of two", o.ring_mib));
    auto subs = parse_subsystems(collectors);
    if (!subs) return subs.error();
    o.subsystems = *subs;
    o.accel_devs = accel;
    o.rdma_devs = rdma;
  }
  return Ok{};
}

// report FILE [MORE...] [--time|--steps] and the outputs and window flags.
CLI::App* add_report_command(CLI::App& app, Options& o) {
  auto* report = app.add_subcommand("report", "Analyse a capture file (no root needed)");
  report->add_option("file", o.capture_path, "Capture written by steptrace record")->required();
  report->add_option("more", o.more_captures,
                     "Captures of the same job from other hosts: one job-level report across them (global ranks, "
                     "nodes, the rank that holds the others back)");
  report->add_option("--json", o.json_path, "Write the report as JSON to FILE (- for stdout)");
  report->add_option_function<std::string>(
      "--time",
      [&o](const std::string& v) {
        auto r = parse_range<double>(v);
        if (!r) throw CLI::ValidationError("--time", "FROM-TO in seconds after the first record, FROM < TO (30-90.5)");
        o.cut_from_s = r->first;
        o.cut_to_s = r->second;
      },
      "Analyse only FROM-TO seconds after the capture's first record (a part of a long capture, for a small "
      "Perfetto trace); with several captures, after the job's earliest recording start on the job clock")
      ->type_name("FROM-TO");
  report->add_option_function<std::string>(
      "--steps",
      [&o](const std::string& v) {
        auto r = parse_range<int64_t>(v);
        if (!r) throw CLI::ValidationError("--steps", "A-B step indexes, A <= B (100-200)");
        o.cut_first_step = r->first;
        o.cut_last_step = r->second;
      },
      "Analyse only the time of steps A to B (from the first rank to start step A to the last to end step B); "
      "with several captures, steps A to B of the job's lowest rank, on the job clock")
      ->type_name("A-B");
  add_output_flags(report, o);
  add_window_flags(report, o);
  return report;

}

// diff A B [--fail-if-slower PCT] [--json FILE] and the replay's window flags.
CLI::App* add_diff_command(CLI::App& app, Options& o) {
  auto* diff = app.add_subcommand(
      "diff", "Compare two runs (captures or JSON reports): per rank and category, B - A per step with a 95 % "
              "interval; exit 1 with --fail-if-slower when B is slower by more");
  diff->add_option("A B", o.diff_paths, "The two runs: capture files (steptrace record) or JSON reports (--json)")
      ->required()
      ->expected(2);
  diff->add_option("--fail-if-slower", o.fail_if_slower_pct,
                   "Exit 1 when B's mean step is significantly slower than A's by more than PCT percent (a CI gate)")
      ->check(CLI::Range(0.0, 1000.0))
      ->type_name("PCT");
  diff->add_option("--json", o.json_path, "Write the comparison as JSON to FILE (- for stdout)");
  diff->add_flag("--force", o.force, "--json may replace an existing file");
  add_window_flags(diff, o);
  return diff;
}

}  // namespace

Result<Options> parse_options(int argc, const char* const* argv, int* exit_code) {
  Options o;
  std::string collectors = "all";
  std::vector<std::string> accel, rdma;
  std::string pid_csv, max_size;
  CLI::App app{"steptrace: why is each training step as slow as it is?"};
  app.set_version_flag("--version", std::string("steptrace ") + kVersion);
  app.add_flag("-v,--verbose", o.verbose, "More output (repeat for libbpf debug)");
  app.require_subcommand(1);
  app.footer("Always on: steptrace daemon [--config FILE] [options]   (steptrace daemon --help)\n"
             "Ask it:    steptrace ctl dump [REASON] | reload | level NAME|auto   (as root; steptrace ctl --help)\n"
             "Manual: man 8 steptrace");
  app.fallthrough();
  // run's job argv travels as "extras"; any other stray argument is rejected below.
  app.allow_extras(true);

  auto* run = app.add_subcommand("run", "Launch a job and trace it: steptrace run [opts] -- CMD ARGS...");
  add_trace_flags(run, o, collectors, accel, rdma);
  add_job_flags(run, o);
  // Everything after the first non-option (or after "--") is the job's argv.
  run->prefix_command(true);
  run->allow_extras(true);

  auto* attach = app.add_subcommand("attach", "Trace running processes, a cgroup, or the whole host");
  add_trace_flags(attach, o, collectors, accel, rdma);
  add_target_flags(attach, o, pid_csv);

  auto* record = app.add_subcommand(
      "record", "Record raw events to a capture file: record -o FILE [-p PID|--cgroup P|--all|-- CMD...]");
  add_trace_flags(record, o, collectors, accel, rdma);
  add_job_flags(record, o);
  record->add_option("-o,--output", o.record_path,
                     "Capture file to write (mode 0600); an existing file is refused unless --force")
      ->required();
  record->add_option("--max-size", max_size,
                     "Stop recording before the capture file would pass SIZE bytes (suffix k, m or g: 512m, 2g); "
                     "the capture keeps its complete chunks and trailer, the report is marked INCOMPLETE")
      ->type_name("SIZE");
  add_target_flags(record, o, pid_csv);
  record->prefix_command(true);
  record->allow_extras(true);

  auto* report = add_report_command(app, o);
  auto* diff = add_diff_command(app, o);

  auto* top = app.add_subcommand(
      "top", "Live view, refreshed every second (q or Ctrl-C quits): top [-p PID|--cgroup P|--all|-- CMD...]");
  add_trace_flags(top, o, collectors, accel, rdma);
  add_job_flags(top, o);
  add_target_flags(top, o, pid_csv);
  top->add_option("--interval", o.top_interval_s, "Refresh interval in seconds")->check(CLI::Range(0.1, 60.0));
  top->prefix_command(true);
  top->allow_extras(true);

  auto* check = app.add_subcommand("check", "Preflight: can tracing work here? (non-zero exit if not)");
  check->add_option("--btf", o.btf_path, "Kernel BTF file when /sys/kernel/btf/vmlinux is missing");

  // Everything after the first "--" is the job's, verbatim: CLI11 parses
  // only what comes before it.
  if (argc > 0) app.name(argv[0]);
  std::vector<std::string> words;
  std::optional<std::vector<std::string>> after_dashes;
  for (int i = 1; i < argc; ++i) {
    if (!after_dashes && std::string_view(argv[i]) == "--") {
      after_dashes.emplace();
      continue;
    }
    (after_dashes ? *after_dashes : words).emplace_back(argv[i]);
  }
  try {
    std::reverse(words.begin(), words.end());  // CLI11 takes a vector in reverse order
    app.parse(words);
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
  *exit_code = 2;

  if (auto st = finish_options(o, Parsed{run, attach, record, report, top, diff, &app, std::move(after_dashes)}, pid_csv,
                               max_size, collectors, accel, rdma);
      !st)
    return st.error();
  *exit_code = 0;
  return o;
}

}  // namespace steptrace
