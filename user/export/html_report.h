// SPDX-License-Identifier: Apache-2.0
// `--html FILE`: one self-contained page (no network): the verdict, a stacked
// bar chart of every step's breakdown (inline SVG drawn by inline JS from the
// report embedded as JSON), per-rank comparison and the evidence. The verdict,
// evidence and rank table are plain HTML, so the page reads without scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/analysis.h"

namespace steptrace {

std::string html_report(const SessionReport& r);

// Escape text for HTML element content and attribute values.
std::string html_escape(const std::string& s);
// The pages' stylesheet (the merged job's page adds its own rules to it).
const char* html_report_css();
// JSON that is safe inside <script>: "<", ">" and "&" only as \u escapes.
std::string script_safe_json(const nlohmann::json& j);

}  // namespace steptrace
