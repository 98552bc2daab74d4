// SPDX-License-Identifier: Apache-2.0
// Session::snapshot / done: what `steptrace top` reads every refresh. The
// snapshot goes through Analysis::finish on a copy, so the live view and the
// final report come from the same pipeline.
#include <sys/resource.h>

#include "session/session.h"

namespace steptrace {
namespace {

double cpu_s_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

Result<SessionReport> Session::snapshot() const {
  SessionReport r = report_;  // copy: the live analysis keeps accumulating
  uint64_t now = monotonic_ns();
  r.window_start_ns = start_mono_ns_;
  r.window_end_ns = now;
  r.decode = decoder_.stats();
  auto drops = tracer_->read_stats();
  if (!drops) return drops.error();
  r.drops = *drops;
  r.job = r.analysis.finish(now, r.drops);
  r.tracer_cpu_s = cpu_s_now() - start_cpu_s_;
  r.wall_s = static_cast<double>(now - start_mono_ns_) / 1e9;
  return r;
}

bool Session::done() {
  if (child_ && (job_status_ >= 0 || child_->reap(&job_status_))) return true;
  return opts_.duration_s > 0 && monotonic_ns() >= start_mono_ns_ + static_cast<uint64_t>(opts_.duration_s * 1e9);
}

}  // namespace steptrace
