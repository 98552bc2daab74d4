// SPDX-License-Identifier: Apache-2.0
// The device counters (signals/signals_data.h) in a capture: a recording
// session writes what its sampler found as user notes (capture/user_note.h)
// beside the kernel's records, and a replay reads them back into the same
// SignalsData, so a report from the capture splits executions by the
// datastore and judges the link by the adapters' counters as the live
// session did.
//
// Notes: "signals_setup" (devices, adapters, which process has which
// datastore, NUMA placement; written again whenever it changes),
// "signals_threads" (thread names of the attached processes),
// "signals_nds", "signals_efa" (each port's counters as changes from its
// previous sample) and "signals_sysfs". Each holds as many samples as fit in
// one note.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "signals/signals_data.h"

namespace steptrace {

class SignalNoteWriter {
 public:
  // The notes for `fresh` (the samples taken since the last call) and for
  // whatever of `all`'s setup and thread names changed since then. The setup
  // (a few kB of JSON on a large host) and the names are compared at most
  // once a second of `now_ns`, and always when `final` (the recording's last
  // call): a change waits at most a second, and a drain tick costs nothing.
  std::vector<nlohmann::json> notes(const signals::SignalsData& all, const signals::SignalsData& fresh,
                                    uint64_t now_ns, bool final = false);
  static constexpr uint64_t kSetupCheckNs = 1'000'000'000;

 private:
  bool setup_checked_ = false;
  uint64_t setup_checked_ns_ = 0;
  std::string setup_sent_;
  std::map<uint32_t, std::string> comms_sent_;
  std::map<int, std::vector<uint64_t>> last_efa_;  // port -> its last written counters
};

class SignalNoteReader {
 public:
  // False when the note is not a signals note. A malformed one is counted
  // and leaves the data as it was (a capture is input like any other).
  bool on_note(const nlohmann::json& note);
  const signals::SignalsData& data() const { return d_; }
  uint64_t malformed() const { return malformed_; }

 private:
  bool setup(const nlohmann::json& j);
  bool threads(const nlohmann::json& j);
  bool nds(const nlohmann::json& j);
  bool efa(const nlohmann::json& j);
  bool sysfs(const nlohmann::json& j);

  signals::SignalsData d_;
  std::map<int, std::vector<uint64_t>> last_efa_;
  uint64_t malformed_ = 0;
};

// True for a note type this module reads.
bool is_signal_note(const nlohmann::json& note);

}  // namespace steptrace
