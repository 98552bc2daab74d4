// SPDX-License-Identifier: Apache-2.0
// What-if results as passive data (attribution/what_if.h computes them): the
// predicted step time if one thing were removed or brought to the median.
// Kept apart from the computation so JobAnalysis can hold them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/categories.h"

namespace steptrace {

enum class WhatIfKind : uint8_t {
  remove_category,          // a category's time gone on one rank (or every rank)
  straggler_to_median,      // the straggler's path at the median of the other ranks'
  dma_overlapped,           // DMA submission hidden behind device compute
  collective_at_link_rate,  // the collective's transfer at the link's rate
};

inline std::string_view what_if_kind_name(WhatIfKind k) {
  switch (k) {
    case WhatIfKind::remove_category: return "remove_category";
    case WhatIfKind::straggler_to_median: return "straggler_to_median";
    case WhatIfKind::dma_overlapped: return "dma_overlapped";
    case WhatIfKind::collective_at_link_rate: return "collective_at_link_rate";
  }
  return "remove_category";
}

struct WhatIf {
  WhatIfKind kind = WhatIfKind::remove_category;
  int rank = -1;                      // -1: every rank (or the job as a whole)
  std::optional<Category> category;   // none: the rank as a whole (straggler to the median)
  std::string fix;                    // what would change, in words
  double saving_ns = 0;               // mean over the counted steps
  double saving_pct = 0;              // of the mean step
  double predicted_step_ns = 0;
  bool helps = false;                 // saves 1 % of the step or more
  std::string reason;                 // why it helps, or why it would not
};

struct WhatIfReport {
  double step_ns = 0;         // the mean counted step the savings are taken from
  uint64_t steps = 0;         // counted steps (of all ranks) the prediction covers
  uint64_t coupled_steps = 0; // of them, in steps a collective couples across ranks
  // Fixes that help, largest saving first; then the large costs whose fix
  // would not help (off the critical path).
  std::vector<WhatIf> items;
};

}  // namespace steptrace
