// SPDX-License-Identifier: Apache-2.0
#include "export/report_stats.h"

#include <fmt/core.h>

#include <algorithm>

namespace steptrace {

Percentiles percentiles(std::vector<uint64_t> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.max = v.back();
  return p;
}

Percentiles percentiles(const std::vector<uint64_t>& v, const LogHistogram& more) {
  LogHistogram h = more;
  for (uint64_t x : v) h.add(x);
  Percentiles p;
  if (h.count() == 0) return p;
  auto at = [&](double q) { return h.at_rank(static_cast<uint64_t>(q * static_cast<double>(h.count() - 1) + 0.5)); };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.max = h.max();
  return p;
}

uint64_t counted_steps(const JobAnalysis&, const RankResult& r) { return r.counted_steps; }

std::vector<const ThreadInfo*> sorted_threads(const SessionReport& r) {
  std::vector<const ThreadInfo*> v;
  for (const auto& [tid, t] : r.analysis.threads.threads()) v.push_back(&t);
  std::sort(v.begin(), v.end(), [](const ThreadInfo* a, const ThreadInfo* b) {
    return a->pid != b->pid ? a->pid < b->pid : a->tid < b->tid;
  });
  return v;
}

StepStats step_stats(const JobAnalysis& job) {
  StepStats s;
  std::vector<uint64_t> durs;
  std::array<std::vector<uint64_t>, kCategories> per;
  for (const auto& r : job.ranks)
    for (const auto& st : r.steps) {
      if (st.index < job.skipped_warmup_steps) continue;
      durs.push_back(st.duration());
      for (size_t c = 0; c < kCategories; ++c) per[c].push_back(st.ns[c]);
    }
  const StepDistribution& old = job.out_of_detail;
  s.counted = durs.size() + old.count();
  if (old.count() == 0) {
    s.step = percentiles(std::move(durs));
    for (size_t c = 0; c < kCategories; ++c) s.category[c] = percentiles(std::move(per[c]));
    return s;
  }
  // Steps no longer in detail are in histograms: the kept ones join them
  // (percentiles then within 1 % of the value; max exact).
  s.approximate = true;
  s.step = percentiles(durs, old.step);
  for (size_t c = 0; c < kCategories; ++c) s.category[c] = percentiles(per[c], old.category[c]);
  return s;
}

std::array<double, kCategories> rank_shares(const RankResult& r) {
  std::array<double, kCategories> s{};
  if (r.counted_ns == 0) return s;
  for (size_t c = 0; c < kCategories; ++c)
    s[c] = static_cast<double>(r.total[c]) / static_cast<double>(r.counted_ns);
  return s;
}

const char* category_label(size_t c) {
  static const char* n[] = {"DEVICE", "DATA", "DMA", "COLL", "HOST", "CONTEND", "OTHER"};
  return c < kCategories ? n[c] : "?";
}

char category_glyph(size_t c) {
  static const char g[] = {'D', 'L', 'M', 'C', 'H', 'X', '.'};
  return c < kCategories ? g[c] : '?';
}

const char* category_color(size_t c) {
  static const char* k[] = {"#4e79a7", "#f28e2b", "#76b7b2", "#e15759", "#59a14f", "#edc948", "#bab0ac"};
  return c < kCategories ? k[c] : "#000000";
}

int category_ansi_bg(size_t c) {
  static const int k[] = {44, 43, 46, 41, 42, 45, 47};
  return c < kCategories ? k[c] : 49;
}

std::string human_ns(uint64_t ns) {
  double v = static_cast<double>(ns);
  if (ns >= 10'000'000'000ull) return fmt::format("{:.1f} s", v / 1e9);
  if (ns >= 1'000'000'000ull) return fmt::format("{:.2f} s", v / 1e9);
  if (ns >= 10'000'000ull) return fmt::format("{:.0f} ms", v / 1e6);
  if (ns >= 1'000'000ull) return fmt::format("{:.1f} ms", v / 1e6);
  return fmt::format("{:.1f} us", v / 1e3);
}

}  // namespace steptrace
