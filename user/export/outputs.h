// SPDX-License-Identifier: Apache-2.0
// The file outputs of a report (--perfetto, --html), written from the same
// SessionReport as the terminal text and --json.
#pragma once

#include <string>

#include "cli/options.h"
#include "export/html_report.h"
#include "export/perfetto.h"
#include "export/text_report.h"
#include "pipeline/analysis.h"
#include "util/output_file.h"
#include "util/result.h"

namespace steptrace {

// --force and --output-mode, for every report file (util/output_file.h).
OutputFileOptions output_file_options(const Options& o);
// --json FILE, --perfetto and --html can be written (checked before tracing starts).
Status check_file_outputs(const Options& o);
// --perfetto and --html when given.
Status write_file_outputs(const Options& o, const SessionReport& r);

}  // namespace steptrace
