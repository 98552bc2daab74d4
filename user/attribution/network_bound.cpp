// SPDX-License-Identifier: Apache-2.0
#include "attribution/network_bound.h"

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

std::vector<uint64_t> last_arrivals(const std::vector<RankResult*>& ranks) {
  std::vector<uint64_t> last;
  if (ranks.size() < 2) return last;
  size_t n = ranks.front()->steps.size();
  for (const auto* r : ranks) n = std::min(n, r->steps.size());
  last.assign(n, 0);
  for (size_t k = 0; k < n; ++k)
    for (const auto* r : ranks) {
      const uint64_t a = r->steps[k].arrival_ns;
      if (a == 0) {  // a rank without an arrival: no estimate for this step
        last[k] = 0;
        break;
      }
      last[k] = std::max(last[k], a);
    }
  return last;
}

}  // namespace steptrace
