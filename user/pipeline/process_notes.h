// SPDX-License-Identifier: Apache-2.0
// What the user notes of a session say (capture/user_note.h): each traced
// process's identity (container, pod, launcher variables) and where the
// runtime library of a process was probed, or why it could not be. Kept for
// the whole session (a fold forgets timeline, not who the ranks are), capped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/proc_identity.h"

namespace steptrace {

struct LibProbeNote {
  uint32_t pid = 0;
  std::string path;   // as the job maps it (its own mount namespace)
  std::string via;    // the path steptrace opened ("/proc/PID/root/...", "/proc/PID/map_files/...")
  int functions = 0;  // functions probed (0: the probe failed)
  std::string error;  // why it failed, or why the path could not be reached
};

struct ProcessNotes {
  static constexpr size_t kMaxIdentities = 4096;
  static constexpr size_t kMaxProbes = 256;
  std::map<uint32_t, ProcIdentity> identities;  // by tgid; a later note replaces (exec)
  std::vector<LibProbeNote> probes;
  uint64_t malformed = 0;  // notes that did not parse or lacked their fields
  uint64_t over_cap = 0;   // identities or probes past the caps, not kept

  void on_note(uint32_t pid, const nlohmann::json& note);
  const ProcIdentity* identity(uint32_t pid) const {
    auto it = identities.find(pid);
    return it == identities.end() ? nullptr : &it->second;
  }
  // The probes of `pid`'s libraries, else every probe (a library is probed
  // once for every process that maps it).
  std::vector<const LibProbeNote*> probes_for(uint32_t pid) const;
};

// Note bodies, built where the facts are learnt.
nlohmann::json identity_note(const ProcIdentity& id);
nlohmann::json probe_note(const LibProbeNote& p);
// The parent of a process that was running when tracing began (attach): its
// fork is not in the trace, and a rank's loader workers are its children.
nlohmann::json parent_note(uint32_t ppid);
// The parent a "parent" note names, if it is one and well formed.
std::optional<uint32_t> parent_in_note(const nlohmann::json& note);

}  // namespace steptrace
