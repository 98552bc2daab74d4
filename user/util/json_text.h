// SPDX-License-Identifier: Apache-2.0
// JSON text for every sink: nlohmann's dump() throws on a string that is not
// UTF-8; here such bytes become U+FFFD instead (strings from the host are
// cleaned where they enter, util/text.h; this is the net under that rule).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace steptrace {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace steptrace
