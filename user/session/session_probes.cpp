// SPDX-License-Identifier: Apache-2.0
// The session's facts from outside the kernel's records: where the runtime
// library of each process is and how it was probed (through the process's
// own root: a container's paths are not the host's), and who each process
// is. Both become user notes in the record stream (capture/user_note.h).
#include <fmt/core.h>

#include "capture/user_note.h"
#include "loader/tracer.h"
#include "pipeline/clock_notes.h"
#include "session/session.h"
#include "util/log.h"
#include "util/proc_identity.h"
#include "util/text.h"

namespace steptrace {

void Session::note_new_process(uint32_t pid) {
  if (!(opts_.subsystems & ST_SUB_UPROBE) || !opts_.discover_libs) return;
  device_call_rescans_.forget(pid);  // a new image may load a runtime of its own
  scan_.add(pid, monotonic_ns());
}

void Session::note_device_call(uint32_t pid) {
  if (!(opts_.subsystems & ST_SUB_UPROBE) || !opts_.discover_libs) return;
  if (device_call_rescans_.first_call(pid)) scan_.add(pid, monotonic_ns());
}

void Session::note_identity(uint32_t pid) {
  // Two /proc reads per exec on the drain thread. Under --all every exec on
  // the host is one: bounded there like the analysis's own cap
  // (ProcessNotes::kMaxIdentities), so an exec storm costs at most that many.
  if (opts_.target.all && identity_reads_ >= ProcessNotes::kMaxIdentities) return;
  ++identity_reads_;
  auto id = read_proc_identity(root_.proc(), pid);
  if (!id.empty()) emit_note(pid, identity_note(id));
}

void Session::emit_note(uint32_t pid, const nlohmann::json& body) {
  auto rec = make_user_note(monotonic_ns(), pid, body);
  if (!rec.empty()) pending_notes_.push_back(std::move(rec));
}

ClockAnchor Session::note_clock_anchor() {
  const ClockAnchor a = take_clock_anchor();
  emit_note(0, clock_note(a));
  next_clock_anchor_ns_ = a.mono_ns + kClockAnchorEveryNs;
  return a;
}

// Notes join the record stream between drains (never from inside the
// pipeline's observer), so the capture holds them where the analysis saw them.
// The device sampler's new samples into the capture by the next drain,
// beside the records they explain; the setup and thread names at most once
// a second, and whatever changed at the end.
void Session::write_signal_notes(bool final) {
  if (!signals_ || !writer_) return;
  for (const auto& note : signal_notes_.notes(signals_->data(), signals_->take_new(), monotonic_ns(), final))
    emit_note(0, note);
}

void Session::flush_notes() {
  auto notes = std::move(pending_notes_);
  pending_notes_.clear();
  for (const auto& rec : notes) on_record(rec.data(), rec.size());
}

void Session::attach_lib(const std::string& path) {
  std::string key = file_key(path);
  if (!probed_libs_.insert(key.empty() ? path : key).second) return;
  LibProbeNote note;
  note.path = note.via = host_string(path);
  note.functions = attach_lib_probes(*tracer_, path, &report_.warnings);
  log::info("probing {} ({} functions)", path, note.functions);
  report_.runtime_libs.push_back(host_string(path));
  emit_note(0, probe_note(note));
}

void Session::attach_mapped_lib(uint32_t pid, const MappedLib& lib) {
  if (!probed_libs_.insert(lib.key()).second) return;
  LibProbeNote note;
  note.pid = pid;
  note.path = host_string(lib.path);
  auto where = resolve_mapped_lib(root_.proc(), pid, lib);
  if (where.path.empty()) {
    note.error = host_string(where.error);
    report_.warnings.push_back(fmt::format("cannot reach {} as process {} maps it: {}", note.path, pid, note.error));
  } else {
    note.via = host_string(where.path);
    std::vector<std::string> failed;
    note.functions = attach_lib_probes(*tracer_, where.path, &failed);
    if (!failed.empty()) note.error = host_string(failed.front());
    report_.warnings.insert(report_.warnings.end(), failed.begin(), failed.end());
    log::info("probing {} of process {} through {} ({} functions)", lib.path, pid, where.path, note.functions);
  }
  report_.runtime_libs.push_back(note.path);
  emit_note(pid, probe_note(note));
}

void Session::scan_for_libs() {
  scan_.scan(monotonic_ns(), root_.proc(), [this](uint32_t pid, const MappedLib& lib) { attach_mapped_lib(pid, lib); });
}

}  // namespace steptrace
