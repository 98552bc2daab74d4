// SPDX-License-Identifier: Apache-2.0
// The what-if (attribution/what_if.h) in each output: the JSON array
// `job.what_if`, the terminal section's lines and the HTML table. One place
// so the three say the same thing in the same order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attribution/what_if_types.h"

namespace steptrace {

nlohmann::json what_if_json(const WhatIfReport& w);

// The terminal section: a title, then one unwrapped line per fix ("fix X ->
// step -N ms (-P %)", ranked) and per cost that would not help. Empty without
// counted steps.
struct WhatIfText {
  std::string title;
  std::vector<std::string> lines;
};
WhatIfText what_if_text(const WhatIfReport& w, size_t max_helps = 5);

// An HTML section (heading and table, id "what-if"); empty without counted steps.
std::string what_if_html(const WhatIfReport& w);

}  // namespace steptrace
