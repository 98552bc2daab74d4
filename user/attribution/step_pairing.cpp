// SPDX-License-Identifier: Apache-2.0
#include "attribution/step_pairing.h"

#include <cstdlib>
#include <limits>

#include "util/intervals.h"

namespace steptrace {

namespace {
constexpr long kMaxShift = 4;
}  // namespace

std::vector<long> pair_by_end(const std::vector<std::vector<uint64_t>>& ends) {
  std::vector<long> shift(ends.size(), 0);
  for (size_t r = 1; r < ends.size(); ++r) {
    uint64_t best = std::numeric_limits<uint64_t>::max();
    for (long d = -kMaxShift; d <= kMaxShift; ++d) {
      std::vector<uint64_t> dist;
      for (size_t k = 0; k < ends[0].size(); ++k) {
        const size_t j = paired_index(k, d, ends[r].size());
        if (j == kUnpaired) continue;
        const uint64_t a = ends[0][k], b = ends[r][j];
        dist.push_back(a > b ? a - b : b - a);
      }
      if (dist.empty() || dist.size() * 2 < ends[0].size()) continue;
      const uint64_t m = median_ns(dist);
      if (m < best || (m == best && std::labs(d) < std::labs(shift[r]))) {
        best = m;
        shift[r] = d;
      }
    }
  }
  return shift;
}

}  // namespace steptrace
