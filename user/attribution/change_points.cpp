// SPDX-License-Identifier: Apache-2.0
#include "attribution/change_points.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "attribution/job_analysis.h"

namespace steptrace {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The noise of a series that may hold level shifts: from its first
// differences (a shift moves one of them), MAD scaled to a standard deviation.
double robust_sigma(const std::vector<double>& x) {
  if (x.size() < 3) return 0;
  std::vector<double> d;
  d.reserve(x.size() - 1);
  for (size_t i = 1; i < x.size(); ++i) d.push_back(x[i] - x[i - 1]);
  const double med = median_of(d);
  for (auto& v : d) v = std::abs(v - med);
  return 1.4826 * median_of(std::move(d)) / std::sqrt(2.0);
}

struct Split {
  size_t at = 0;
  double stat = 0;
};

// Prefix sums of a series and of its squares: any segment's mean and variance in O(1).
struct Prefix {
  std::vector<double> sum, sq;
  explicit Prefix(const std::vector<double>& y) : sum(y.size() + 1, 0), sq(y.size() + 1, 0) {
    for (size_t i = 0; i < y.size(); ++i) {
      sum[i + 1] = sum[i] + y[i];
      sq[i + 1] = sq[i] + y[i] * y[i];
    }
  }
  double mean(size_t lo, size_t hi) const { return (sum[hi] - sum[lo]) / static_cast<double>(hi - lo); }
  double var(size_t lo, size_t hi) const {
    const double n = static_cast<double>(hi - lo), m = mean(lo, hi);
    return std::max(0.0, (sq[hi] - sq[lo]) / n - m * m) * n / std::max(1.0, n - 1);
  }
};

// The best split of y[lo, hi), or stat 0. Welch's statistic: each side
// keeps its own spread (a regression often brings its own noise: a slow
// loader worker makes every other step late), each floored at a quarter of
// the series' noise so that a short quiet run is not taken for certainty.
Split best_split(const Prefix& p, size_t lo, size_t hi, double sigma, const ChangeOptions& opt) {
  Split best;
  if (hi - lo < 2 * opt.min_segment) return best;
  const double floor_var = 0.0625 * sigma * sigma;
  for (size_t k = lo + opt.min_segment; k + opt.min_segment <= hi; ++k) {
    const double nl = static_cast<double>(k - lo), nr = static_cast<double>(hi - k);
    const double ml = p.mean(lo, k), mr = p.mean(k, hi);
    const double se = std::sqrt(std::max(p.var(lo, k), floor_var) / nl + std::max(p.var(k, hi), floor_var) / nr);
    const double stat = se > 0 ? std::abs(mr - ml) / se : 0;
    if (stat > best.stat && ml > 0 && std::abs(mr - ml) >= opt.min_change * ml) best = {k, stat};
  }
  return best;
}

void segment(const Prefix& sum, const std::vector<double>& y, size_t lo, size_t hi, double sigma,
             const ChangeOptions& opt, std::vector<size_t>& out) {
  if (out.size() >= opt.max_changes) return;
  const Split s = best_split(sum, lo, hi, sigma, opt);
  if (s.stat < opt.threshold) return;
  // The medians either side must differ too: a few very slow steps on one
  // side move a mean, not a median.
  const auto at = [&](size_t i) { return y.begin() + static_cast<std::ptrdiff_t>(i); };
  const double ml = median_of({at(lo), at(s.at)}), mr = median_of({at(s.at), at(hi)});
  if (!(ml > 0) || std::abs(mr - ml) < opt.min_change * ml) return;
  out.push_back(s.at);
  segment(sum, y, lo, s.at, sigma, opt, out);
  segment(sum, y, s.at, hi, sigma, opt, out);
}

double mean_duration_ms(const std::vector<SeriesPoint>& p, size_t lo, size_t hi) {
  if (hi <= lo) return 0;
  double s = 0;
  for (size_t i = lo; i < hi; ++i) s += static_cast<double>(p[i].duration_ns);
  return s / static_cast<double>(hi - lo) / 1e6;
}

double mean_category_ms(const std::vector<SeriesPoint>& p, size_t lo, size_t hi, size_t c) {
  if (hi <= lo) return 0;
  double s = 0;
  for (size_t i = lo; i < hi; ++i) s += static_cast<double>(p[i].ns[c]);
  return s / static_cast<double>(hi - lo) / 1e6;
}

// One rank's change, before it is joined with the other ranks'.
struct RankChange {
  int rank = 0;
  size_t series = 0;       // which input series
  size_t at = 0, lo = 0, hi = 0;  // the split and the segments either side
  double stat = 0;
  uint64_t at_ns = 0;
};

// The segments either side of each split: up to the neighbouring splits.
std::vector<RankChange> rank_changes(const RankSeriesView& r, size_t series, const ChangeOptions& opt) {
  std::vector<RankChange> out;
  const auto& p = *r.points;
  std::vector<double> x;
  x.reserve(p.size());
  for (const auto& s : p) x.push_back(static_cast<double>(s.duration_ns));
  auto idx = change_indices(x, opt);
  for (size_t i = 0; i < idx.size(); ++i) {
    RankChange c;
    c.rank = r.rank;
    c.series = series;
    c.at = idx[i];
    c.lo = i > 0 ? idx[i - 1] : 0;
    c.hi = i + 1 < idx.size() ? idx[i + 1] : p.size();
    c.at_ns = p[c.at].start_ns;
    const double nl = static_cast<double>(c.at - c.lo), nr = static_cast<double>(c.hi - c.at);
    c.stat = std::abs(mean_duration_ms(p, c.at, c.hi) - mean_duration_ms(p, c.lo, c.at)) / std::sqrt(1 / nl + 1 / nr);
    out.push_back(c);
  }
  return out;
}

// Host-side cost that grew most; the collective only when it grew on the
// ranks far beyond any host-side cost (the network itself slowed).
void name_cause(ChangePoint& cp, const std::vector<RankChange>& members, const std::vector<RankSeriesView>& ranks) {
  double best = 0, collective = 0;
  int collective_rank = -1;
  for (const auto& m : members) {
    const auto& p = *ranks[m.series].points;
    for (size_t c = 0; c < kCategories; ++c) {
      const double d = mean_category_ms(p, m.at, m.hi, c) - mean_category_ms(p, m.lo, m.at, c);
      const bool up = cp.slower();
      const double grew = up ? d : -d;
      if (static_cast<Category>(c) == Category::collective) {
        if (grew > collective) collective = grew, collective_rank = m.rank;
        continue;
      }
      if (grew > best) {
        best = grew;
        cp.cause_rank = m.rank;
        cp.cause = static_cast<Category>(c);
        cp.cause_delta_ms = d;
      }
    }
  }
  if (collective > 1.5 * best && collective_rank >= 0) {
    cp.cause_rank = collective_rank;
    cp.cause = Category::collective;
    cp.cause_delta_ms = cp.slower() ? collective : -collective;
  }
}

}  // namespace

namespace {

std::vector<size_t> segment_series(const std::vector<double>& x, const ChangeOptions& opt) {
  std::vector<size_t> out;
  if (opt.min_segment == 0 || x.size() < 2 * opt.min_segment) return out;
  const double med = median_of(x);
  // A floor under the noise: a series steadier than 0.5 % of its level
  // (a timer-driven job) would make any wobble a change.
  const double sigma = std::max(robust_sigma(x), 0.005 * med);
  if (!(sigma > 0)) return out;
  // One very slow step (a checkpoint, a hiccup) is not a level: clipped
  // (not so close that a real shift of the level is clipped below min_change).
  const double clip = std::max(4 * sigma, 0.25 * std::abs(med));
  std::vector<double> y(x);
  for (auto& v : y) v = std::clamp(v, med - clip, med + clip);
  segment(Prefix(y), y, 0, y.size(), sigma, opt, out);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<size_t> change_indices(const std::vector<double>& x, const ChangeOptions& opt) {
  auto out = segment_series(x, opt);
  if (!out.empty() || opt.min_segment < 2) return out;
  // Steps that alternate (two loader workers, one slow: every other step
  // waits) hide a change in their spread: searched again as the means of
  // consecutive pairs, which the alternation leaves level.
  std::vector<double> pairs;
  for (size_t i = 0; i + 1 < x.size(); i += 2) pairs.push_back((x[i] + x[i + 1]) / 2);
  ChangeOptions half = opt;
  half.min_segment = opt.min_segment / 2;
  for (size_t k : segment_series(pairs, half)) out.push_back(2 * k);
  return out;
}

std::vector<ChangePoint> find_changes(const std::vector<RankSeriesView>& ranks, const ChangeOptions& opt) {
  std::vector<RankChange> all;
  double step_ns = 0;
  size_t steps = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!ranks[i].points) continue;
    for (const auto& p : *ranks[i].points) step_ns += static_cast<double>(p.duration_ns), ++steps;
    auto rc = rank_changes(ranks[i], i, opt);
    all.insert(all.end(), rc.begin(), rc.end());
  }
  if (all.empty()) return {};
  step_ns /= static_cast<double>(steps);
  std::sort(all.begin(), all.end(), [](const RankChange& a, const RankChange& b) { return a.at_ns < b.at_ns; });
  // The same change seen by several ranks: their splits lie within a few steps.
  const double join_ns = step_ns * static_cast<double>(std::max<size_t>(opt.min_segment / 2, 1));
  std::vector<ChangePoint> out;
  for (size_t i = 0; i < all.size();) {
    size_t j = i + 1;
    while (j < all.size() && static_cast<double>(all[j].at_ns - all[i].at_ns) <= join_ns) ++j;
    std::vector<RankChange> members(all.begin() + static_cast<std::ptrdiff_t>(i),
                                    all.begin() + static_cast<std::ptrdiff_t>(j));
    const auto ref = *std::max_element(members.begin(), members.end(),
                                       [](const RankChange& a, const RankChange& b) { return a.stat < b.stat; });
    const auto& p = *ranks[ref.series].points;
    ChangePoint cp;
    cp.at_ns = ref.at_ns;
    cp.step = p[ref.at].index;
    cp.reference_rank = ref.rank;
    cp.before_ms = mean_duration_ms(p, ref.lo, ref.at);
    cp.after_ms = mean_duration_ms(p, ref.at, ref.hi);
    cp.score = ref.stat;
    for (const auto& m : members)
      if (std::find(cp.ranks.begin(), cp.ranks.end(), m.rank) == cp.ranks.end()) cp.ranks.push_back(m.rank);
    std::sort(cp.ranks.begin(), cp.ranks.end());
    name_cause(cp, members, ranks);
    out.push_back(std::move(cp));
    i = j;
  }
  return out;
}

std::vector<ChangePoint> find_changes(const JobAnalysis& job, const ChangeOptions& opt) {
  std::vector<std::vector<SeriesPoint>> series(job.ranks.size());
  std::vector<RankSeriesView> views;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const auto& r = job.ranks[i];
    for (const auto& st : r.steps) {
      if (st.index < job.skipped_warmup_steps || st.end_ns <= st.start_ns) continue;
      series[i].push_back({st.index, st.start_ns, st.duration(), st.ns});
    }
    views.push_back({r.rank, &series[i]});
  }
  return find_changes(views, opt);
}

std::string describe_change(const ChangePoint& c) {
  std::string s = fmt::format("step time {} {:.0f} % at step {} ({:.1f} -> {:.1f} ms)", c.slower() ? "rose" : "fell",
                              std::abs(c.change_pct()), c.step, c.before_ms, c.after_ms);
  if (c.cause_rank >= 0)
    s += fmt::format(": {} {:+.1f} ms/step on rank {}", category_name(c.cause), c.cause_delta_ms, c.cause_rank);
  return s;
}

}  // namespace steptrace
