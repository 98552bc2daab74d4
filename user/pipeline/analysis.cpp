// SPDX-License-Identifier: Apache-2.0
#include "pipeline/analysis.h"

namespace steptrace {

namespace {
// Exited threads kept by name once a long session folds (the rest are summed).
constexpr size_t kKeepExitedThreads = 2048;
// Closed sockets kept by tuple (the rest are summed).
constexpr size_t kKeepClosedSockets = 1024;
}  // namespace

JobAnalysis Analysis::finish(uint64_t end_ns, const DropStats& drops) {
  timeline.finish(end_ns, &threads);
  AnalysisOptions opt = ledger.resume({});
  opt.device_signals = device_signals;
  JobAnalysis ja = analyze_job(timeline, threads, drops, opt);
  if (ledger.empty()) return ja;
  JobAnalysis all = ledger.merge(std::move(ja));
  judge(all, timeline, drops);
  return all;
}

uint64_t Analysis::fold(uint64_t now_ns) {
  // The window's analysis runs on a copy: the live state machine keeps its
  // open segments, and the copy's are closed at now_ns.
  TimelineStore tl = timeline;
  ThreadTable th = threads;
  tl.finish(now_ns, &th);
  AnalysisOptions opt = ledger.resume({});
  opt.device_signals = device_signals;
  const JobAnalysis ja = analyze_job(tl, th, DropStats{}, opt);
  const uint64_t keep_from = ledger.fold(ja, tl, now_ns);
  if (!keep_from) return 0;
  timeline.forget_before(keep_from);
  threads.fold_exited(kKeepExitedThreads);
  collectors.fold_closed_sockets(kKeepClosedSockets);
  return keep_from;
}

size_t Analysis::memory_bytes() const {
  return timeline.memory_bytes() + ledger.memory_bytes() + threads.threads().size() * 512 +
         collectors.socks.size() * sizeof(SockStats) + collectors.block.size() * 96;
}

}  // namespace steptrace
