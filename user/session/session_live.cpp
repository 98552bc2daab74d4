// SPDX-License-Identifier: Apache-2.0
// Session::snapshot / analyse / done: what `steptrace top` reads every
// refresh. The snapshot is a copy (taken on the drain thread, bounded by the
// window); the analysis of it runs through Analysis::finish like the final
// report's, on top's worker thread, so a refresh never holds up the drain.
#include <signal.h>
#include <sys/resource.h>

#include "session/session.h"
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

void Session::request_stop(int sig, std::string reason) {
  if (end_reason_.empty()) end_reason_ = std::move(reason);
  if (job_) job_->request_stop(sig, monotonic_ns());
  if (!job_ || opts_.keep_running) stop_requested_ = true;
}

std::string Session::stop_status() const {
  if (job_) return job_->stop_status(monotonic_ns());
  return stop_requested_ ? "stopping" : "";
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
  return stop_requested_;
}

}  // namespace steptrace
