// SPDX-License-Identifier: Apache-2.0
// Clock anchors (util/clock_anchor.h) as user notes in the record stream:
// {"note": "clock", "mono_ns", "real_ns", "bound_ns"}. A capture replays
// them where the live session took them; the report's source section says
// how the recording maps to the wall clock, how tightly, and whether the
// wall clock was stepped while it ran.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "util/clock_anchor.h"

namespace steptrace {

nlohmann::json clock_note(const ClockAnchor& a);
// The anchor a "clock" note holds; nullopt for another note, or one whose
// fields are missing, of the wrong type or out of range.
std::optional<ClockAnchor> anchor_in_note(const nlohmann::json& note);
// The report's "clock" object (JSON schema: source.clock).
nlohmann::json clock_json(const ClockAnchors& c);
// One line for the terminal's source section: "wall clock: 3 anchors,
// +-45 ns, not stepped"; "" with no anchors (an older capture).
std::string clock_line(const ClockAnchors& c);

}  // namespace steptrace
