// SPDX-License-Identifier: Apache-2.0
// Which steps (or executions) of the ranks are the same collective instance.
// Steps are cut per rank, so an attach that began mid-step, or a step one
// rank found and another did not, shifts one rank's numbering against
// another's; a collective releases every rank together, so entries that end
// together are the same instance, whatever each rank did before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace steptrace {

// For each rank (ends[r]: its entries' end times, in order), the shift d
// within +-4 such that its entry k + d is rank 0's entry k: the one whose
// paired entries end closest (median distance) with at least half of rank
// 0's entries paired. shift[0] == 0.
std::vector<long> pair_by_end(const std::vector<std::vector<uint64_t>>& ends);

constexpr size_t kUnpaired = static_cast<size_t>(-1);

// Rank 0's entry k in a rank's numbering (shift from pair_by_end, n entries),
// or kUnpaired.
inline size_t paired_index(size_t k, long shift, size_t n) {
  const long j = static_cast<long>(k) + shift;
  return j >= 0 && j < static_cast<long>(n) ? static_cast<size_t>(j) : kUnpaired;
}

}  // namespace steptrace
