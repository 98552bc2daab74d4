// SPDX-License-Identifier: Apache-2.0
// `steptrace diff A B`: two runs' reports compared step by step - did the
// fix work, did the new build get slower? Per rank and over all ranks, the
// mean step time and each category's ms/step in A and B, the difference with
// a 95 % confidence interval over the steps (Welch), and whether it is a
// real change: the interval excludes zero and the change is at least 1 % of
// A's step. Works on the reports' JSON ("job" object of `--json`), so
// captures and saved JSON reports compare alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/replay.h"
#include "util/result.h"

namespace steptrace {

struct MeanDelta {
  std::string what;            // "step" or a category name
  double a_ms = 0, b_ms = 0;   // means per step
  double delta_ms = 0;         // b - a
  double ci_ms = 0;            // half-width of the 95 % interval of delta (0 with fewer than 2 steps on a side)
  bool significant = false;
};

struct RankDiff {
  int rank = -1;               // -1: all ranks together
  size_t a_steps = 0, b_steps = 0;
  MeanDelta step;
  std::vector<MeanDelta> categories;
};

struct ReportDiff {
  std::string a_name, b_name, a_verdict, b_verdict;
  RankDiff all;
  std::vector<RankDiff> ranks;  // ranks present in both, by rank number
  std::vector<std::string> notes;  // what could not be compared (ranks in one run only, no steps)
  double step_change_pct = 0;   // all ranks' mean step, B against A
  double step_change_ci_pct = 0;
};

// One run's "job" object: from a JSON report (`--json`, whole or the job
// object alone) or a capture, replayed with `windows` (as `report` does).
Result<nlohmann::json> load_run(const std::string& path, const WindowPolicy& windows);

// `a` and `b` are the "job" objects of two reports.
ReportDiff diff_reports(const nlohmann::json& a, const nlohmann::json& b, std::string a_name, std::string b_name);

// True when B's mean step is significantly slower than A's by more than pct.
bool slower_than(const ReportDiff& d, double pct);

std::string format_diff_text(const ReportDiff& d);
nlohmann::json diff_json(const ReportDiff& d);

}  // namespace steptrace
