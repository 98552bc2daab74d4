// SPDX-License-Identifier: Apache-2.0
#include "attribution/network_bound.h"

#include "attribution/step_pairing.h"

#include <algorithm>
#include <map>

#include "attribution/job_analysis.h"

namespace steptrace {

double PathTotal::ratio() const {
  std::map<size_t, std::vector<double>> secs;
  for (const auto& s : steps) secs[s.rank].push_back(s.seconds);
  std::map<size_t, double> cap;
  for (auto& [rank, v] : secs) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    cap[rank] = 3 * v[v.size() / 2];
  }
  double bytes = 0, seconds = 0;
  for (const auto& s : steps)
    if (s.seconds <= cap[s.rank]) {
      bytes += s.link_seconds;
      seconds += s.seconds;
    }
  return seconds > 0 ? bytes / seconds : -1;
}

std::vector<std::vector<uint64_t>> last_arrivals(const std::vector<RankResult*>& ranks) {
  std::vector<std::vector<uint64_t>> last;
  if (ranks.size() < 2) return last;
  std::vector<std::vector<uint64_t>> ends;
  for (const auto* r : ranks) {
    ends.emplace_back();
    for (const auto& st : r->steps) ends.back().push_back(st.end_ns);
    last.emplace_back(r->steps.size(), 0);
  }
  const std::vector<long> shift = pair_by_end(ends);
  for (size_t k = 0; k < ends[0].size(); ++k) {
    std::vector<size_t> idx;
    uint64_t at = 0;
    for (size_t i = 0; i < ranks.size() && at != UINT64_MAX; ++i) {
      const size_t j = paired_index(k, shift[i], ranks[i]->steps.size());
      const uint64_t a = j == kUnpaired ? 0 : ranks[i]->steps[j].arrival_ns;
      if (a == 0) at = UINT64_MAX;  // a rank without an arrival: no estimate for this step
      else at = std::max(at, a), idx.push_back(j);
    }
    if (at == UINT64_MAX) continue;
    for (size_t i = 0; i < ranks.size(); ++i) last[i][idx[i]] = at;
  }
  return last;
}

}  // namespace steptrace
