// SPDX-License-Identifier: Apache-2.0
// Small arithmetic on nanosecond intervals and samples, shared by the steps
// and attribution rooms.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace steptrace {

// Length of the overlap of [a0, a1) and [b0, b1); 0 when they do not meet.
inline uint64_t overlap_ns(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  uint64_t s = std::max(a0, b0), e = std::min(a1, b1);
  return e > s ? e - s : 0;
}

// The upper median (element size/2 in sorted order); 0 for no samples.
inline uint64_t median_ns(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace steptrace
