// SPDX-License-Identifier: Apache-2.0
#include "pipeline/analysis.h"
#include "pipeline/remote_ranks.h"

#include <algorithm>

#include "attribution/device_signal_summary.h"
#include "util/text.h"

namespace steptrace {

namespace {
// Exited threads kept by name once a long session folds (the rest are summed).
constexpr size_t kKeepExitedThreads = 2048;
// Closed sockets kept by tuple (the rest are summed).
constexpr size_t kKeepClosedSockets = 1024;
// Names a capture's notes may give (a corrupt or hostile capture cannot grow it past this).
constexpr size_t kMaxSymbolNames = 4'000'000;
}  // namespace

void Analysis::on_signal_note(const nlohmann::json& note) {
  // A live session's own sampler is the source; its notes are for the capture.
  if (device_signals && !replayed_signals) return;
  if (!replayed_signals) replayed_signals = std::make_shared<SignalNoteReader>();
  replayed_signals->on_note(note);
  device_signals = &replayed_signals->data();
}

JobAnalysis Analysis::finish(uint64_t end_ns, const DropStats& drops) {
  timeline.finish(end_ns, &threads);
  return analyse_closed(threads, drops, device_signals);
}

JobAnalysis Analysis::peek(uint64_t end_ns, const DropStats& drops, const signals::SignalsData* signals) {
  ThreadTable th = threads;
  const TimelineStore::FinishedView view(timeline, end_ns, &th);
  return analyse_closed(th, drops, signals);
}

JobAnalysis Analysis::peek_steps(uint64_t end_ns) {
  ThreadTable th = threads;
  const TimelineStore::FinishedView view(timeline, end_ns, &th);
  AnalysisOptions opt = ledger.resume({});
  opt.steps_only = true;
  JobAnalysis ja = analyze_job(timeline, th, DropStats{}, opt);
  return ledger.empty() ? ja : ledger.merge(std::move(ja));
}

AnalysisOptions Analysis::window_options(const signals::SignalsData* signals) {
  AnalysisOptions opt = ledger.resume({});
  opt.device_signals = signals;
  samples.sort_by_time();
  opt.samples = &samples;
  return opt;
}

JobAnalysis Analysis::analyse_closed(const ThreadTable& th, const DropStats& drops,
                                     const signals::SignalsData* signals) {
  JobAnalysis ja = analyze_job(timeline, th, drops, window_options(signals));
  ja.profile.folded = profile_folded;
  if (ledger.empty()) {
    note_remote_ranks(ja, notes);
    return ja;
  }
  JobAnalysis all = ledger.merge(std::move(ja));
  resummarize_device_signals(all, th);
  judge(all, timeline, drops);
  note_remote_ranks(all, notes);
  return all;
}

uint64_t Analysis::fold(uint64_t now_ns) {
  // The window is analysed in place, its open segments closed at now_ns
  // for as long as `view` lives (the live state machine gets them back), and
  // the totals of a copy of the thread table take them.
  ThreadTable th = threads;
  uint64_t keep_from = 0;
  JobAnalysis ja;
  {
    const TimelineStore::FinishedView view(timeline, now_ns, &th);
    ja = analyze_job(timeline, th, DropStats{}, window_options(device_signals));
    keep_from = ledger.fold(ja, timeline, now_ns);
  }
  if (!keep_from) return 0;
  // Stack samples up to the earliest point a rank's next window resumes at
  // belong to folded steps (or to none): counted now, never classified again.
  uint64_t counted_until = now_ns;
  for (const auto& [pid, p] : ledger.resume({}).resume) counted_until = std::min(counted_until, p.cut_ns);
  for (const auto& s : ja.profile.samples)
    if (s.ts < counted_until) ++profile_folded[{static_cast<uint8_t>(s.category), static_cast<uint8_t>(s.role), s.stack}];
  samples.forget_before(counted_until);
  timeline.forget_before(keep_from);
  threads.fold_exited(kKeepExitedThreads);
  collectors.fold_closed_sockets(kKeepClosedSockets);
  return keep_from;
}

void Analysis::add_symbol_note(const nlohmann::json& note) {
  auto names = note.find("names");
  if (names == note.end() || !names->is_array()) {
    ++notes.malformed;
    return;
  }
  for (const auto& n : *names) {
    if (!n.is_array() || n.size() != 3 || !n[0].is_number_unsigned() || !n[1].is_number_unsigned() ||
        !n[2].is_string() || samples.names().size() >= kMaxSymbolNames) {
      ++notes.malformed;
      return;
    }
    samples.set_name(n[0].get<uint32_t>(), n[1].get<uint64_t>(),
                     host_string(utf8_prefix(n[2].get_ref<const std::string&>(), 512)));
  }
}

size_t Analysis::memory_bytes() const {
  return timeline.memory_bytes() + ledger.memory_bytes() + samples.memory_bytes() + profile_folded.size() * 64 + threads.threads().size() * 512 +
         collectors.socks.size() * sizeof(SockStats) + collectors.block.size() * 96 +
         streams.marks().capacity() * sizeof(StreamMark);
}

}  // namespace steptrace
