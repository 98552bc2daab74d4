// SPDX-License-Identifier: Apache-2.0
// The terminal report of `run`, `attach`, `top` (on exit) and `report`:
// verdict first, per-step table, percentiles, evidence, per-rank lines with
// the straggler marked, then a drop/overhead footer. Every line fits in 100
// columns; per-thread and per-subsystem tables appear with -v.
#pragma once

#include <string>

#include "pipeline/analysis.h"

namespace steptrace {

inline constexpr size_t kReportColumns = 100;

struct TextStyle {
  bool color = false;  // ANSI colour (callers enable it only on a TTY without --no-color)
  int verbose = 0;     // >= 1: thread, ioctl, block, TCP and attach-tier tables
};

std::string format_report_text(const SessionReport& r, const TextStyle& style = {});

// Colour only when stdout is a terminal, TERM is not "dumb", NO_COLOR is unset
// and --no-color was not given.
bool want_color(bool no_color_flag, int fd = 1);

}  // namespace steptrace
