// SPDX-License-Identifier: Apache-2.0
#include "pipeline/pipeline.h"

#include <algorithm>
#include <cstring>

#include "capture/user_note.h"

namespace steptrace {

void Pipeline::push(const void* data, size_t len) {
  st_event_header h{};
  if (len >= sizeof(st_event_header)) {
    std::memcpy(&h, data, sizeof(h));
    if (observer_) observer_(h, data, len);
    // Userspace's own facts: not events in time, so not reordered or decoded,
    // and not the kernel's records (those are what the drop counters count).
    if (h.kind == ST_EV_USER_NOTE) {
      ++notes_;
      if (auto note = parse_user_note(data, len)) analysis_.on_note(h.pid, *note);
      else ++analysis_.notes.malformed;
      return;
    }
    // Stack samples are joined with the steps by time when a window is
    // analysed: not timeline events, so not reordered.
    if (h.kind == ST_EV_CPU_SAMPLE) {
      ++records_;
      ++window_records_;
      decoder_.count(h.kind, analysis_.samples.on_record(data, len));
      newest_ts_ = std::max<uint64_t>(newest_ts_, h.ts_ns);
      return;
    }
  }
  ++records_;
  ++window_records_;
  if (auto ev = decoder_.decode(data, len)) {
    const uint64_t ts = h.ts_ns;  // decoded: the record held a whole header, the event's own
    newest_ts_ = std::max<uint64_t>(newest_ts_, ts);
    reorder_.push(*ev, ts);
  }
}

void Pipeline::advance() {
  reorder_.release([this](const Event& e, uint64_t ts) {
    released_ts_ = ts;
    analysis_.on_event(e);
  });
  maybe_fold();
}

void Pipeline::maybe_fold() {
  if (!released_ts_ || (!policy_.fold_every_ns && !policy_.max_memory_bytes)) return;
  const uint64_t now = released_ts_;
  if (!last_fold_ts_) last_fold_ts_ = last_check_ts_ = now;
  const bool due = policy_.fold_every_ns && now >= last_fold_ts_ + policy_.fold_every_ns;
  bool over = false, full = false;
  if ((policy_.max_memory_bytes || policy_.fold_above_bytes) && now >= last_check_ts_ + 1'000'000'000ull) {
    last_check_ts_ = now;
    if (policy_.max_memory_bytes) {
      const size_t bytes = analysis_.memory_bytes();
      peak_bytes_ = std::max<uint64_t>(peak_bytes_, bytes);
      over = bytes > policy_.max_memory_bytes;
    }
    // What the window holds, not the room kept for the next one: a fold
    // leaves the room, and the room alone must not fold every second.
    full = policy_.fold_above_bytes && analysis_.timeline.used_bytes() > policy_.fold_above_bytes;
  }
  if (!due && !over && !full) return;
  if (!due && !over) ++early_folds_;
  last_fold_ts_ = now;
  if (fold_guard_) fold_guard_(true);
  if (const uint64_t keep_from = analysis_.fold(now)) {
    ++folds_;
    if (fold_observer_) fold_observer_(keep_from);
  }
  if (fold_guard_) fold_guard_(false);
  if (!over) return;
  ++cap_hits_;
  if (analysis_.memory_bytes() > policy_.max_memory_bytes) analysis_.timeline.give_back_room();
  if (analysis_.memory_bytes() > policy_.max_memory_bytes) {
    // The window alone is over the cap (a storm of threads, or no step ends):
    // its detail goes; the steps open in it are lost, and the report says so.
    ++cap_forgets_;
    analysis_.timeline.forget_before(now);
  }
}

WindowStats Pipeline::window_stats() const {
  WindowStats w;
  w.fold_every_ns = policy_.fold_every_ns;
  w.max_memory_bytes = policy_.max_memory_bytes;
  w.folds = folds_;
  w.memory_cap_hits = cap_hits_;
  w.early_folds = early_folds_;
  w.memory_cap_forgets = cap_forgets_;
  w.steps_out_of_detail = analysis_.ledger.steps_out_of_detail();
  w.peak_memory_bytes = peak_bytes_;
  return w;
}

void Pipeline::flush() {
  reorder_.flush([this](const Event& e, uint64_t ts) {
    released_ts_ = ts;
    analysis_.on_event(e);
  });
}

void Pipeline::name_threads(const SysRoot& root) {
  for (const auto& [key, t] : analysis_.threads.threads())
    if (t.comm.empty() && key == t.tid)  // live threads only: a retired one's tid is another task's now
      if (auto c = root.thread_comm(t.pid, t.tid)) analysis_.threads.set_comm(t.pid, t.tid, *c);
}

JobAnalysis Pipeline::close_window(uint64_t end_ns, const DropStats& drops) {
  JobAnalysis ja = analysis_.finish(end_ns, drops);
  start_window();
  return ja;
}

void Pipeline::start_window() {
  const auto* signals = analysis_.device_signals;
  auto replayed = analysis_.replayed_signals;  // what `signals` points at in a replay
  SampleStore samples = std::move(analysis_.samples);
  ClockAnchors clock = analysis_.clock;  // the wall clock's anchors span the session, not a window
  analysis_ = Analysis();
  analysis_.device_signals = signals;
  analysis_.replayed_signals = std::move(replayed);
  analysis_.clock = clock;
  // The daemon's windows: the stacks and their names stay (later samples
  // point at them), the window's samples go with it.
  analysis_.samples = std::move(samples);
  analysis_.samples.forget_before(UINT64_MAX);
  window_records_ = 0;
}

void Pipeline::restart() {
  flush();
  late_base_ += reorder_.late();
  const DecodeStats& d = decoder_.stats();
  for (size_t k = 0; k < ST_EV_KIND_MAX; ++k) decode_base_.decoded[k] += d.decoded[k];
  decode_base_.unknown_kind += d.unknown_kind;
  decode_base_.bad_size += d.bad_size;
  decoder_ = Decoder();
  reorder_ = Reorderer();
}

DecodeStats Pipeline::decode_stats() const {
  DecodeStats s = decode_base_;
  const DecodeStats& d = decoder_.stats();
  for (size_t k = 0; k < ST_EV_KIND_MAX; ++k) s.decoded[k] += d.decoded[k];
  s.unknown_kind += d.unknown_kind;
  s.bad_size += d.bad_size;
  return s;
}

}  // namespace steptrace
