// SPDX-License-Identifier: Apache-2.0
// The JSON sink (--json): the session report as one object
// (docs/schema/steptrace-report.schema.json). The terminal text is
// text_report.h; both come from the same SessionReport.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/analysis.h"

namespace steptrace {

nlohmann::json summary_json(const SessionReport& r);
nlohmann::json job_json(const JobAnalysis& job);

}  // namespace steptrace
