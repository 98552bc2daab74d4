// SPDX-License-Identifier: Apache-2.0
// Session::snapshot / analyse / done: what `steptrace top` reads every
// refresh. The snapshot is a copy (taken on the drain thread, bounded by the
// window); the analysis of it runs through Analysis::finish like the final
// report's, on top's worker thread, so a refresh never holds up the drain.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <utility>
#include <fmt/core.h>
#include <sys/resource.h>

#include "session/session.h"
#include "util/sys_root.h"
#include "util/text.h"
#include "util/log.h"
#include "util/self_usage.h"

namespace steptrace {

Result<LiveSnapshot> Session::snapshot() const {
  LiveSnapshot s;
  SessionReport& r = s.report;
  r = report_;
  r.analysis = pipe_.analysis();  // a copy: the live analysis keeps accumulating
  if (signals_) {
    s.signals = std::make_unique<signals::SignalsData>(signals_->data());
    r.analysis.device_signals = s.signals.get();
  }
  uint64_t now = monotonic_ns();
  r.window_start_ns = start_mono_ns_;
  r.window_end_ns = now;
  r.records = pipe_.records();
  r.decode = pipe_.decode_stats();
  r.late_records = pipe_.late();
  r.windows = pipe_.window_stats();
  auto drops = tracer_->read_stats();
  if (!drops) return drops.error();
  r.drops = *drops;
  r.tracer_cpu_s = self_cpu_times().total() - start_cpu_s_;
  r.wall_s = static_cast<double>(now - start_mono_ns_) / 1e9;
  return s;
}

void Session::analyse(LiveSnapshot& s) {
  SessionReport& r = s.report;
  r.job = r.analysis.finish(r.window_end_ns, r.drops);
  mark_window_losses(r);
}

// Said at once on stderr (the session may never end on its own), and kept for the report.
void Session::check_hang() {
  auto h = hang_.check(monotonic_ns(), pipe_.analysis(), root_);
  if (!h) return;
  log::warn("{}", h->headline());
  for (const auto& line : h->lines()) log::warn("  {}", line);
}

// The report's totals cannot tell a storm from a consumer that was away: said
// at most every 10 s while the kernel drops records, with how long the
// drain thread was gone at the longest since the last check.
void Session::check_drops() {
  const uint64_t now = monotonic_ns();
  if (last_poll_ns_) max_drain_gap_ns_ = std::max(max_drain_gap_ns_, now - last_poll_ns_);
  last_poll_ns_ = now;
  if (now - drops_checked_ns_ < 1'000'000'000ull) return;
  drops_checked_ns_ = now;
  // A record is dropped only when the ring is full, and then the drains find
  // records: a second of empty drains dropped nothing, and an idle session
  // skips the ~30 map reads (bpf syscalls) of a check. The report's counts
  // are read at the end either way.
  if (std::exchange(drained_since_drop_check_, 0) == 0) {
    max_drain_gap_ns_ = 0;  // an idle sleep is not a late drain
    return;
  }
  const uint64_t gap = std::exchange(max_drain_gap_ns_, 0);
  auto d = tracer_->read_stats();
  if (!d || d->total_dropped() <= drops_warned_ || (drops_warned_ns_ && now - drops_warned_ns_ < 10'000'000'000ull))
    return;
  log::warn("the kernel dropped {} records at {:.1f} s of tracing (ring {} MiB; longest wait between drains {:.0f} ms, "
            "longest fold {:.0f} ms)",
            d->total_dropped() - drops_warned_, static_cast<double>(now - start_mono_ns_) / 1e9, opts_.ring_mib,
            static_cast<double>(gap) / 1e6, static_cast<double>(keeper_->stats().longest_hold_ns) / 1e6);
  drops_warned_ = d->total_dropped();
  drops_warned_ns_ = now;
}

void Session::request_stop(int sig, std::string reason) {
  if (end_reason_.empty()) end_reason_ = std::move(reason);
  if (job_) job_->request_stop(sig, monotonic_ns());
  if (!job_ || opts_.keep_running) stop_requested_ = true;
}

std::string Session::stop_status() const {
  if (job_) return job_->stop_status(monotonic_ns());
  return stop_requested_ ? "stopping" : "";
}

void Session::sleep_before_drain() {
  if (reader_->more()) return;  // a drain cut short at its bound (a storm) goes on at once
  // The device counters keep their own clock (an attached datastore is read
  // every 10 ms): the drain interval is only the ring's.
  // So is the next maps scan of a new program image (20 ms after its exec,
  // then backing off), except under --all, where every exec on the host is one.
  const uint64_t due =
      std::min(signals_ ? signals_->next_due_ns() : UINT64_MAX, exec_wake_ ? scan_.next_due_ns() : UINT64_MAX);
  if (!wait_) {
    uint64_t ns = static_cast<uint64_t>(opts_.drain_ms) * 1'000'000ull;
    if (due != UINT64_MAX) {
      const uint64_t now = monotonic_ns();
      ns = std::min(ns, due > now ? due - now : 0);
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
    return;
  }
  if (watching_devs_ && !dev_files_.pending()) {
    wait_->watch_paths({});  // every named device file is known: stop watching
    watching_devs_ = false;
  }
  // A job being stopped is watched on the timer (its grace period, its exit).
  const bool stopping = stop_requested_ || (job_ && job_->stop_requested());
  if (wait_->next_is_idle(stopping ? 1 : last_drained_)) {
    tracer_->set_consumer_idle(true);
    // Records that came between the last drain and the flag woke nobody.
    if (auto n = reader_->drain(); n && *n > 0) {
      tracer_->set_consumer_idle(false);
      wait_->next_is_idle(*n);
      return;
    }
  }
  uint64_t deadline =
      opts_.duration_s > 0 && !duration_over_ ? start_mono_ns_ + static_cast<uint64_t>(opts_.duration_s * 1e9) : 0;
  if (due != UINT64_MAX) deadline = deadline ? std::min(deadline, due) : std::max<uint64_t>(due, 1);
  wait_->sleep(deadline);
  tracer_->set_consumer_idle(false);
}

bool Session::done() {
  const uint64_t now = monotonic_ns();
  if (!duration_over_ && opts_.duration_s > 0 &&
      now >= start_mono_ns_ + static_cast<uint64_t>(opts_.duration_s * 1e9)) {
    duration_over_ = true;
    request_stop(SIGTERM, "duration");
  }
  if (job_) {
    if (!job_->advance(now)) return false;
    if (end_reason_.empty()) end_reason_ = "job exited";
    return true;
  }
  // attach -p: once every traced process has exited there is nothing left
  // to trace (--all, --cgroup, --pod and --container can gain members: they
  // run until -d or a signal). Looked for once a second.
  const auto& t = opts_.target;
  if (!stop_requested_ && !t.pids.empty() && !t.all && now >= alive_checked_ns_ + 1'000'000'000ull) {
    alive_checked_ns_ = now;
    if (!any_target_alive()) request_stop(0, "every traced process exited");
  }
  return stop_requested_;
}

// A traced process that has not exited: one of the threads seen that has no
// exit recorded and whose process is still there and not a zombie (a parent
// that never reaps it keeps its /proc entry).
bool Session::any_target_alive() const {
  std::set<uint32_t> looked;
  for (const auto& [key, th] : pipe_.analysis().threads.threads()) {
    if (th.exited || !looked.insert(th.pid).second) continue;
    auto text = read_small_file(root_.proc() + "/" + std::to_string(th.pid) + "/stat", 4096);
    if (!text) continue;
    auto st = parse_proc_stat(*text);
    if (st && st->state != 'Z' && st->state != 'X') return true;
  }
  return false;
}

// The lines a person watching sees: what is traced, and record's progress.
std::string Session::banner() const {
  const auto& t = opts_.target;
  std::string what;
  if (job_) what = fmt::format("the job (pid {}, {}) and what it starts", job_->pid(), host_string(opts_.argv.front()));
  else if (t.all) what = "every process on the host";
  else if (!t.cgroup_path.empty()) what = fmt::format("cgroup {} ({} process(es) now, and what joins it)", t.cgroup_path, seed_count_);
  else what = fmt::format("{} process(es) and their children", seed_count_);
  std::string verb = opts_.record_path.empty() ? "Tracing" : "Recording";
  return fmt::format("{} {}{}. Ctrl-C to end.", verb, what,
                     opts_.record_path.empty() ? "" : " into " + opts_.record_path);
}

std::string Session::progress_text() const {
  const double secs = static_cast<double>(monotonic_ns() - start_mono_ns_) / 1e9;
  uint64_t dropped = 0;
  if (auto d = tracer_->read_stats()) dropped = d->total_dropped();
  return fmt::format("{:.0f} s, {} events, {} dropped, {:.1f} MiB written", secs, pipe_.records(), dropped,
                     writer_ ? static_cast<double>(writer_->bytes_written()) / (1 << 20) : 0.0);
}

}  // namespace steptrace
