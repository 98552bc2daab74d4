// SPDX-License-Identifier: Apache-2.0
// Streaming percentiles for steps no longer kept in detail: a log-bucketed
// histogram (buckets 1 % wide from 1 us; below that, one bucket per
// nanosecond range [0, 1 us) is not split), exact count, sum and max. A
// session that folds its steps (pipeline/step_ledger.h) adds each step that
// leaves the detail here, so percentiles still cover every counted step, to
// within 1 % of the value for the part no longer in detail.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "attribution/categories.h"

namespace steptrace {

class LogHistogram {
 public:
  void add(uint64_t v, uint64_t n = 1) {
    bins_[bin_of(v)] += n;
    count_ += n;
    if (v > max_) max_ = v;
  }
  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  // The value at nearest rank `rank` (0-based) in ascending order: the
  // middle of its bucket, never above the largest value seen.
  uint64_t at_rank(uint64_t rank) const {
    uint64_t seen = 0;
    for (const auto& [b, n] : bins_) {
      seen += n;
      if (rank < seen) return std::min(value_of(b), max_);
    }
    return max_;
  }
  const std::map<uint32_t, uint64_t>& bins() const { return bins_; }
  static uint32_t bin_of(uint64_t v) {
    if (v < kBase) return 0;
    return 1 + static_cast<uint32_t>(std::log(static_cast<double>(v) / kBase) / std::log(kRatio));
  }
  static uint64_t value_of(uint32_t b) {
    if (b == 0) return kBase / 2;
    return static_cast<uint64_t>(kBase * std::pow(kRatio, static_cast<double>(b) - 0.5));
  }

 private:
  static constexpr double kBase = 1000.0;  // 1 us
  static constexpr double kRatio = 1.01;
  std::map<uint32_t, uint64_t> bins_;  // sparse: step times cluster
  uint64_t count_ = 0, max_ = 0;
};

// Counted steps that left the detail: their durations and each category's time.
struct StepDistribution {
  LogHistogram step;
  std::array<LogHistogram, kCategories> category{};
  uint64_t count() const { return step.count(); }
};

}  // namespace steptrace
