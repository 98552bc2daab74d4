// SPDX-License-Identifier: Apache-2.0
// ST_EV_USER_NOTE records: facts userspace learns outside the kernel's
// records (a process's identity, a runtime library's probes), written into
// the record stream so that a capture replays them where a live session saw
// them. A note is a JSON object; "note" names its type. Readers skip types
// they do not know.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "util/proc_identity.h"

namespace steptrace {

// The record for `body` (hdr.pid = pid), or an empty vector when the JSON is
// over ST_USER_NOTE_MAX bytes.
std::vector<uint8_t> make_user_note(uint64_t ts_ns, uint32_t pid, const nlohmann::json& body);
// The JSON object of a note record; nullopt when the record is malformed
// (short, a length past the record, not a JSON object).
std::optional<nlohmann::json> parse_user_note(const void* data, size_t len);

nlohmann::json identity_to_json(const ProcIdentity& id);
// Fields of the wrong type are left empty (a note is input like any other).
ProcIdentity identity_from_json(const nlohmann::json& j);

}  // namespace steptrace
