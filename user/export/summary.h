// SPDX-License-Identifier: Apache-2.0
// The session summary as text (terminal) and JSON. Later stages (steps,
// attribution, verdict) add their sections to the same report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/analysis.h"

namespace steptrace {

std::string format_summary_text(const SessionReport& r);
nlohmann::json summary_json(const SessionReport& r);
nlohmann::json job_json(const JobAnalysis& job);

}  // namespace steptrace
