// SPDX-License-Identifier: Apache-2.0
// The device counters in the daemon: the sampler a session runs
// (signals/device_signals.h), on its own thread (signals/sampler_thread.h),
// over the accelerator processes the daemon tracks. Every window's analysis
// reads its data (device execution split by each rank's datastore, the link
// judged by the EFA counters), and a flight-recorder dump carries its
// samples as the notes a recording has (pipeline/signal_notes.h), so
// `steptrace report` on a dump splits the device time as the daemon did.
#include <vector>

#include "capture/user_note.h"
#include "daemon/daemon_impl.h"
#include "pipeline/signal_notes.h"

namespace steptrace::daemon {

void Daemon::start_device_signals() {
  if (!cfg_.device_counters) return;
  signals::SignalsConfig sc;
  sc.sysfs_root = cfg_.sysfs_root;
  sc.dev_root = cfg_.dev_root;
  sampler_ = std::make_unique<signals::SamplerThread>(sc);
  // Every window's analysis points at the copy taken as it closes
  // (Pipeline::start_window carries the pointer over).
  pipe_.analysis().device_signals = &signals_seen_;
}

void Daemon::tick_device_signals() {
  if (!sampler_) return;
  // The processes that hold an accelerator: each may have a datastore (all
  // alike, so none goes first).
  std::vector<uint32_t> pids;
  pids.reserve(tracked_.size());
  for (const auto& [pid, id] : tracked_) pids.push_back(pid);
  sampler_->set_pids(std::move(pids));
}

std::vector<std::vector<uint8_t>> Daemon::signal_notes(uint64_t from_ns, uint64_t now) const {
  std::vector<std::vector<uint8_t>> out;
  if (!sampler_) return out;
  // What the sampler holds: the flight recorder's span at least (older
  // samples are forgotten as windows close), the setup and the thread names.
  // Stamped at the span's start, so a replay reads them before the records
  // they describe.
  const signals::SignalsData all = sampler_->snapshot();
  SignalNoteWriter writer;
  for (const auto& note : writer.notes(all, all, now, true)) out.push_back(make_user_note(from_ns, 0, note));
  return out;
}

}  // namespace steptrace::daemon
