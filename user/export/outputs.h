// SPDX-License-Identifier: Apache-2.0
// The file outputs of a report (--perfetto, --html), written from the same
// SessionReport as the terminal text and --json.
#pragma once

#include <string>

#include "cli/options.h"
#include "export/html_report.h"
#include "export/perfetto.h"
#include "export/text_report.h"
#include "session/analysis.h"
#include "util/result.h"

namespace steptrace {

// Writes PATH.tmp then renames it into place.
Status write_text_file(const std::string& path, const std::string& text);
// --perfetto and --html when given.
Status write_file_outputs(const Options& o, const SessionReport& r);

}  // namespace steptrace
