// SPDX-License-Identifier: Apache-2.0
// Regressions caught where they start: change points in each rank's
// step-time series, joined across ranks, with the category and rank whose
// time moved most. Offline over a report's steps (judge) and online over the
// daemon's per-rank series (daemon/windows.cpp) with the same detector.
//
// The detector is binary segmentation with Welch's two-sample statistic: for
// each candidate split the difference of the means either side over its
// standard error, each side with its own spread (floored at a quarter of the
// series' noise, taken robustly from first differences), the steps clipped
// so that one very slow step is not a level. A split is reported when the
// statistic passes `threshold`, the means and the medians differ by
// `min_change` of the earlier one and both sides hold `min_segment` steps;
// the halves are searched again for more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attribution/categories.h"

namespace steptrace {

struct JobAnalysis;

struct ChangeOptions {
  size_t min_segment = 8;    // steps either side of a change (the detection delay, in steps)
  double threshold = 6.0;    // difference of means / its standard error
  double min_change = 0.10;  // |after - before| / before
  size_t max_changes = 8;    // per series
};

// One step of one rank, as the detector reads it.
struct SeriesPoint {
  int index = 0;            // the rank's step number
  uint64_t start_ns = 0;    // CLOCK_MONOTONIC
  uint64_t duration_ns = 0;
  CategoryNs ns{};
};

struct RankSeriesView {
  int rank = 0;
  const std::vector<SeriesPoint>* points = nullptr;  // in step order
};

struct ChangePoint {
  uint64_t at_ns = 0;       // start of the first step after the change (the reference rank's)
  int step = 0;             // that step's number
  int reference_rank = -1;  // the rank whose series changed most clearly
  std::vector<int> ranks;   // every rank whose series changed here
  double before_ms = 0, after_ms = 0;  // mean step time either side, reference rank
  double score = 0;         // the statistic at the split
  // What moved most (ms per step), host-side categories first: the waiting
  // ranks' collective grows with the culprit's cost and is not its cause.
  int cause_rank = -1;
  Category cause = Category::other;
  double cause_delta_ms = 0;
  double change_pct() const { return before_ms > 0 ? (after_ms - before_ms) / before_ms * 100.0 : 0; }
  bool slower() const { return after_ms > before_ms; }
};

// Split positions (indices into x, the first element of the later segment), ascending.
std::vector<size_t> change_indices(const std::vector<double>& x, const ChangeOptions& opt = {});

// Change points of a job from its ranks' series, joined across ranks (the
// same change seen by ranks within min_segment/2 of a step time of each other).
std::vector<ChangePoint> find_changes(const std::vector<RankSeriesView>& ranks, const ChangeOptions& opt = {});

// Over a report's counted steps (each rank's steps kept in detail).
std::vector<ChangePoint> find_changes(const JobAnalysis& job, const ChangeOptions& opt = {});

// "step time rose 23 % at step 1840: data_loading +21.0 ms/step on rank 3"
std::string describe_change(const ChangePoint& c);

}  // namespace steptrace
