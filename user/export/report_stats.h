// SPDX-License-Identifier: Apache-2.0
// Numbers every output (terminal, top, HTML, Perfetto) derives the same way
// from one SessionReport: percentiles over counted steps, per-rank shares,
// short category labels and colours.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/analysis.h"

namespace steptrace {

struct Percentiles {
  uint64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
};
// Nearest-rank percentiles (same rule as the JSON and HTML outputs).
Percentiles percentiles(std::vector<uint64_t> v);
// Over v and the values in a histogram (each within 1 % of its value; max exact).
Percentiles percentiles(const std::vector<uint64_t>& v, const LogHistogram& more);

struct StepStats {
  size_t counted = 0;  // steps of all ranks after warm-up
  bool approximate = false;  // some from a histogram (steps no longer kept in detail)
  Percentiles step;
  std::array<Percentiles, kCategories> category{};
};
StepStats step_stats(const JobAnalysis& job);

// Every thread of the report, by pid then tid (the order every sink lists them in).
std::vector<const ThreadInfo*> sorted_threads(const SessionReport& r);

// Steps of one rank that count (index >= skipped warm-up steps).
uint64_t counted_steps(const JobAnalysis& job, const RankResult& r);
// Share (0..1) of each category in the rank's counted steps.
std::array<double, kCategories> rank_shares(const RankResult& r);

// Column labels ("DEVICE", "DATA", ...) and one-letter bar glyphs.
const char* category_label(size_t c);
char category_glyph(size_t c);
// Colours (CSS hex) shared by the HTML chart and the legend.
const char* category_color(size_t c);
// ANSI background colour code for top's bars.
int category_ansi_bg(size_t c);

// Human duration: "812 ms", "1.24 s", "35.0 us".
std::string human_ns(uint64_t ns);

}  // namespace steptrace
