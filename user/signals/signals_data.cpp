// SPDX-License-Identifier: Apache-2.0
#include "signals/signals_data.h"

#include <algorithm>

namespace steptrace::signals {

std::optional<double> efa_counter_at(const SignalsData& d, int p, size_t k, uint64_t t) {
  const EfaSample* lo = nullptr;
  const EfaSample* hi = nullptr;
  for (const auto& s : d.efa) {
    if (s.port != p || k >= s.v.size() || s.v[k] == UINT64_MAX) continue;
    if (s.ts <= t) lo = &s;
    if (s.ts >= t) {
      hi = &s;
      break;
    }
  }
  if (!lo && !hi) return std::nullopt;
  if (!lo) return static_cast<double>(hi->v[k]);
  if (!hi || hi->ts == lo->ts) return static_cast<double>(lo->v[k]);
  double f = static_cast<double>(t - lo->ts) / static_cast<double>(hi->ts - lo->ts);
  return static_cast<double>(lo->v[k]) + f * (static_cast<double>(hi->v[k]) - static_cast<double>(lo->v[k]));
}

size_t efa_counter_index(const std::string& name) {
  const auto& n = efa_counter_names();
  return static_cast<size_t>(std::find(n.begin(), n.end(), name) - n.begin());
}

}  // namespace steptrace::signals
