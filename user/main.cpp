// SPDX-License-Identifier: Apache-2.0
// steptrace: parse -> run the command -> exit code. Everything else lives in
// the library so tests drive the same code.
#include <bpf/libbpf.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <string_view>

#include "cli/options.h"
#include "daemon/control_client.h"
#include "daemon/daemon.h"
#include "export/outputs.h"
#include "export/report_diff.h"
#include "session/top_command.h"
#include "session/tracer_scheduling.h"
#include "loader/preflight.h"
#include "export/summary.h"
#include "multinode/job_cut.h"
#include "multinode/job_html.h"
#include "multinode/job_merge.h"
#include "multinode/job_perfetto.h"
#include "multinode/job_view.h"
#include "pipeline/replay.h"
#include "session/session.h"
#include "util/json_text.h"
#include "util/log.h"

using namespace steptrace;

namespace {

// The last stop signal received; the session forwards it to the job (or
// ends tracing in attach mode) and clears it.
std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal.store(sig); }

// SIGINT/SIGTERM/SIGHUP/SIGQUIT stop tracing (and, forwarded, the job):
// an ssh disconnect (SIGHUP) still closes a capture with its trailer.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  // The loops poll g_signal; no call needs to be interrupted to notice it.
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

// A launched job's orphans (a launcher that died before its ranks) are
// reparented to steptrace instead of init, so a stop reaches and reaps them.
void become_subreaper(Options& o) {
  if (o.argv.empty()) return;
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0) o.subreaper = true;
}

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG && log::level() < log::Level::debug) return 0;
  if (level == LIBBPF_INFO && log::level() < log::Level::info) return 0;
  return std::vfprintf(stderr, fmt, args);
}

int cmd_check(const Options& o) {
  auto f = probe_features(o.btf_path);
  auto lockdown = read_small_file("/sys/kernel/security/lockdown");
  auto rows = run_preflight(f, read_capabilities(), parse_lockdown(lockdown.value_or("")));
  fmt::print("{}", format_preflight(rows));
  bool ok = preflight_ok(rows);
  fmt::print("{}\n", ok ? "tracing can work here" : "tracing cannot work here: fix the FAIL rows above");
  return ok ? 0 : 1;
}

// "3.2 MiB" for a file just written; "?" when it cannot be stat()ed.
std::string file_size_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "?";
  const double b = static_cast<double>(st.st_size);
  return b >= (1 << 20) ? fmt::format("{:.1f} MiB", b / (1 << 20)) : fmt::format("{:.1f} KiB", b / 1024);
}

int print_report(const Options& o, const SessionReport& report) {
  // --perfetto / --html files, and the terminal text: all from this one report.
  if (auto st = write_file_outputs(o, report); !st) {
    log::error("{}", st.error().message);
    return 1;
  }
  for (const auto* path : {&o.perfetto_path, &o.html_path})
    if (!path->empty()) fmt::print(stderr, "steptrace: wrote {} ({})\n", *path, file_size_text(*path));
  if (o.json_path == "-") {
    fmt::print("{}\n", json_text(summary_json(report), 2));
    return 0;
  }
  std::fputs(format_report_text(report, {want_color(o.no_color), o.verbose}).c_str(), stdout);
  if (!o.json_path.empty()) {
    if (auto st = write_output_file(o.json_path, json_text(summary_json(report), 2) + "\n", output_file_options(o));
        !st) {
      log::error("{}", st.error().message);
      return 1;
    }
  }
  return 0;
}

// report --steps A-B: the time from the first rank to start step A to the
// last to end step B, found by a first replay of the whole capture.
Result<TimeCut> steps_cut(const Options& o, const WindowPolicy& w) {
  auto whole = replay_capture(o.capture_path, w);
  if (!whole) return whole.error();
  uint64_t from = UINT64_MAX, to = 0;
  for (const auto& rk : whole->job.ranks)
    for (const auto& st : rk.steps) {
      if (static_cast<int64_t>(st.index) == o.cut_first_step) from = std::min(from, st.start_ns);
      if (static_cast<int64_t>(st.index) == o.cut_last_step) to = std::max(to, st.end_ns);
    }
  if (from == UINT64_MAX || to == 0 || to <= from)
    return make_error(fmt::format("--steps {}-{}: no rank has both steps in detail (the last --keep-steps steps of "
                                  "each rank are; --time cuts by time instead)",
                                  o.cut_first_step, o.cut_last_step));
  TimeCut c;
  c.absolute = true;
  c.from_ns = from;
  c.to_ns = to;
  return c;
}

// Every capture of a job replayed (within `cuts`, one per capture, when
// given); false when one cannot be read (said).
bool replay_job(const Options& o, const WindowPolicy& windows, const std::vector<std::string>& paths,
                const std::vector<TimeCut>& cuts, std::deque<SessionReport>& reports, std::vector<JobInput>& inputs) {
  reports.clear();
  inputs.clear();
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    auto r = replay_capture(path, windows, cuts.empty() ? TimeCut{} : cuts[i], ReplayKeeps{.stream_marks = true});
    if (!r) {
      log::error("{}: {}", path, r.error().message);
      return false;
    }
    reports.push_back(std::move(*r));
    // The merge reads steps, identities, clocks and stream marks: unless a
    // merged trace is asked for, the timeline and the samples of each host
    // need not stay while the next one is read.
    if (o.perfetto_path.empty()) {
      reports.back().analysis.timeline = TimelineStore{};
      reports.back().analysis.samples = SampleStore{};
    }
    inputs.push_back({path, &reports.back()});
  }
  return true;
}

// report A B ...: each capture analysed alone, then one job across them.
// With --time or --steps, a first merge of the whole captures aligns the
// hosts, and each is replayed again within the job's span (multinode/job_cut.h).
int cmd_job_report(const Options& o, const WindowPolicy& windows) {
  std::vector<std::string> paths{o.capture_path};
  paths.insert(paths.end(), o.more_captures.begin(), o.more_captures.end());
  std::deque<SessionReport> reports;
  std::vector<JobInput> inputs;
  if (!replay_job(o, windows, paths, {}, reports, inputs)) return 1;
  JobReport job = merge_job(inputs);
  if (o.cut_from_s >= 0 || o.cut_first_step >= 0) {
    std::vector<uint64_t> first;
    for (const auto& r : reports) first.push_back(r.window_start_ns);
    auto cuts = job_cuts(job, first, {o.cut_from_s, o.cut_to_s, o.cut_first_step, o.cut_last_step});
    if (!cuts) {
      log::error("{}", cuts.error().message);
      return 1;
    }
    if (!replay_job(o, windows, paths, *cuts, reports, inputs)) return 1;
    job = merge_job(inputs);
  }
  if (!o.perfetto_path.empty()) {
    if (auto st = write_output_file(o.perfetto_path, json_text(job_perfetto_trace(job, inputs)) + "\n",
                                    output_file_options(o));
        !st) {
      log::error("{}", st.error().message);
      return 1;
    }
    fmt::print(stderr, "steptrace: wrote {} ({})\n", o.perfetto_path, file_size_text(o.perfetto_path));
  }
  if (!o.html_path.empty()) {
    if (auto st = write_output_file(o.html_path, job_html(job), output_file_options(o)); !st) {
      log::error("{}", st.error().message);
      return 1;
    }
    fmt::print(stderr, "steptrace: wrote {} ({})\n", o.html_path, file_size_text(o.html_path));
  }
  const std::string json = json_text(job_report_json(job), 2) + "\n";
  if (o.json_path == "-") {
    std::fputs(json.c_str(), stdout);
    return 0;
  }
  std::fputs(format_job_text(job).c_str(), stdout);
  if (!o.json_path.empty()) {
    if (auto st = write_output_file(o.json_path, json, output_file_options(o)); !st) {
      log::error("{}", st.error().message);
      return 1;
    }
  }
  return 0;
}

int cmd_report(const Options& o) {
  const auto windows = WindowPolicy::from(o.window_s, o.max_memory_bytes, o.keep_steps);
  if (!o.more_captures.empty()) return cmd_job_report(o, windows);
  TimeCut cut;
  if (o.cut_from_s >= 0) {
    cut.from_ns = static_cast<uint64_t>(o.cut_from_s * 1e9);
    cut.to_ns = static_cast<uint64_t>(o.cut_to_s * 1e9);
  } else if (o.cut_first_step >= 0) {
    auto c = steps_cut(o, windows);
    if (!c) {
      log::error("{}", c.error().message);
      return 1;
    }
    cut = *c;
  }
  auto r = replay_capture(o.capture_path, windows, cut);
  if (!r) {
    log::error("{}", r.error().message);
    return 1;
  }
  return print_report(o, *r);
}

// diff A B: 0 when B is not slower past --fail-if-slower (or it is not
// given), 1 when it is, 2 when a run cannot be read (as diff(1) does).
int cmd_diff(const Options& o) {
  const auto windows = WindowPolicy::from(o.window_s, o.max_memory_bytes, o.keep_steps);
  std::vector<nlohmann::json> runs;
  for (const auto& path : o.diff_paths) {
    auto j = load_run(path, windows);
    if (!j) {
      log::error("{}", j.error().message);
      return 2;
    }
    runs.push_back(std::move(*j));
  }
  const ReportDiff d = diff_reports(runs[0], runs[1], o.diff_paths[0], o.diff_paths[1]);
  if (o.json_path == "-") {
    fmt::print("{}\n", json_text(diff_json(d), 2));
  } else {
    std::fputs(format_diff_text(d).c_str(), stdout);
    if (!o.json_path.empty())
      if (auto st = write_output_file(o.json_path, json_text(diff_json(d), 2) + "\n", output_file_options(o)); !st) {
        log::error("{}", st.error().message);
        return 2;
      }
  }
  if (o.fail_if_slower_pct >= 0 && slower_than(d, o.fail_if_slower_pct)) {
    fmt::print(stderr, "steptrace: B is slower than A by {:.1f} % (more than --fail-if-slower {:g})\n",
               d.step_change_pct, o.fail_if_slower_pct);
    return 1;
  }
  return 0;
}

int job_status_or(const Options& o, const SessionReport& r, int fallback) {
  // steptrace exits with the job's status (128+N when a signal ended it).
  if (!o.argv.empty() && r.job_exit_code >= 0 && fallback == 0) return r.job_exit_code;
  return fallback;
}

// Before any thread exists: steptrace's threads inherit it (session/tracer_scheduling.h).
void set_own_sched(const Options& o) {
  set_tracer_sched(o.sched == "normal" ? TracerSched::normal : TracerSched::batch);
}

int cmd_top(Options o) {
  set_own_sched(o);
  install_stop_handlers();
  become_subreaper(o);
  auto report = run_top(o, &g_signal);
  if (!report) {
    log::error("{}", report.error().message);
    return 1;
  }
  return job_status_or(o, *report, print_report(o, *report));
}

int cmd_trace(Options o) {
  set_own_sched(o);
  install_stop_handlers();
  become_subreaper(o);

  auto session = Session::start(o);
  if (!session) {
    log::error("{}", session.error().message);
    return 1;
  }
  // As bcc's tools do: what is traced, on stderr (stdout may carry JSON).
  fmt::print(stderr, "steptrace: {}\n", (*session)->banner());
  // A long recording shows it is alive: one line, rewritten every second, on a terminal only.
  const bool progress = o.command == CommandKind::record && ::isatty(2);
  if (progress)
    (*session)->set_ticker([s = session->get()] { fmt::print(stderr, "\r\x1b[Krecording: {}", s->progress_text()); });
  auto st = (*session)->run_loop(&g_signal);
  if (progress) fmt::print(stderr, "\r\x1b[K");
  if (!st) log::error("{}", st.error().message);
  auto report = (*session)->finish();
  if (!report) {
    log::error("{}", report.error().message);
    return 1;
  }
  if (print_report(o, *report) != 0) return 1;
  if (!o.record_path.empty() && report->capture_error.empty())
    fmt::print(stderr, "steptrace: wrote {} ({})\n", o.record_path, file_size_text(o.record_path));
  if (!st) return 1;
  if (!report->capture_error.empty()) return 1;  // record: the capture lost records it should hold
  return job_status_or(o, *report, 0);
}

}  // namespace

int steptrace_main(int argc, char** argv) {
  // `steptrace daemon` has its own flags and config file (user/daemon/).
  if (argc >= 3 && (std::string_view(argv[1]) == "-v" || std::string_view(argv[1]) == "--verbose") &&
      std::string_view(argv[2]) == "daemon") {
    // `steptrace -v daemon ...`: the daemon's own -v.
    argv[2] = argv[1];
    argv[1] = const_cast<char*>("daemon");
  }
  if (argc >= 2 && std::string_view(argv[1]) == "daemon") {
    libbpf_set_print(libbpf_print);
    return steptrace::daemon::daemon_main(argc - 1, argv + 1);
  }
  // `steptrace ctl`: a request to the running daemon over its control socket.
  if (argc >= 2 && std::string_view(argv[1]) == "ctl") return steptrace::daemon::ctl_main(argc - 1, argv + 1);
  int code = 0;
  auto opts = parse_options(argc, argv, &code);
  if (!opts) {
    if (!opts.error().message.empty()) {
      fmt::print(stderr, "steptrace: {}\n", opts.error().message);
    }
    return code;
  }
  if (auto st = check_file_outputs(*opts); !st) {
    log::error("{}", st.error().message);
    return 1;
  }
  log::set_level(opts->verbose >= 2 ? log::Level::debug : opts->verbose == 1 ? log::Level::info : log::Level::warn);
  libbpf_set_print(libbpf_print);
  switch (opts->command) {
    case CommandKind::check: return cmd_check(*opts);
    case CommandKind::report: return cmd_report(*opts);
    case CommandKind::run:
    case CommandKind::record:
    case CommandKind::attach: return cmd_trace(*opts);
    case CommandKind::top: return cmd_top(*opts);
    case CommandKind::diff: return cmd_diff(*opts);
  }
  return 2;
}

// No exception leaves main: whatever escaped (a library's throw on input
// nobody foresaw) ends in one clear line and a non-zero exit, not an abort
// with a core dump and no report.
int main(int argc, char** argv) {
  try {
    return steptrace_main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "steptrace: error: {}\n", e.what());
  } catch (...) {
    fmt::print(stderr, "steptrace: error: unexpected failure\n");
  }
  return 1;
}
