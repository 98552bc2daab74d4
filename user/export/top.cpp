// SPDX-License-Identifier: Apache-2.0
#include "export/top.h"
#include "util/text.h"

#include <fmt/core.h>

#include <algorithm>

#include "export/report_stats.h"
#include "util/log.h"

namespace steptrace {
namespace {

std::string clip(std::string s, size_t w) {
  if (s.size() > w) s = std::string(utf8_prefix(s, w));
  return s;
}

}  // namespace

std::string render_top_frame(const SessionReport& r, const TopView& view, TopFrameState& state) {
  const size_t W = static_cast<size_t>(std::max(40, view.width));
  auto bold = [&](const std::string& s) { return view.color ? "\x1b[1m" + s + "\x1b[0m" : s; };
  const auto& job = r.job;
  std::vector<std::string> lines;

  size_t steps = 0;
  for (const auto& rk : job.ranks) steps += rk.steps_total;
  double dt = r.wall_s - state.last_wall_s;
  double rate = dt > 0 && steps >= state.last_steps ? static_cast<double>(steps - state.last_steps) / dt : 0.0;
  state.last_wall_s = r.wall_s;
  state.last_steps = steps;

  lines.push_back(bold(clip(fmt::format("steptrace top - {:.0f} s - {} ranks - {} steps - {:.2f} steps/s{}", r.wall_s,
                                        job.ranks.size(), steps, rate, view.final_frame ? " - finished" : ""),
                            W)));
  std::string verdict = job.verdict.headline.empty() ? "waiting for steps..." : job.verdict.headline;
  if (r.incomplete()) verdict = "[INCOMPLETE] " + verdict;
  lines.push_back(clip("verdict: " + verdict, W));
  lines.push_back(clip(fmt::format("events {}  dropped {}  tracer CPU {:.1f}%", r.records, r.drops.total_dropped(),
                                   r.wall_s > 0 ? 100.0 * r.tracer_cpu_s / r.wall_s : 0.0),
                       W));
  lines.emplace_back();

  // Legend, wrapped to the width (visible length counted without colour codes).
  std::string legend = " ";
  size_t legend_len = 1;
  for (size_t c = 0; c < kCategories; ++c) {
    std::string g(1, category_glyph(c));
    std::string name(kCategoryNames[c]);
    size_t len = 1 + 1 + 1 + name.size();
    if (legend_len + len > W) {
      lines.push_back(legend);
      legend = " ";
      legend_len = 1;
    }
    legend += " " + (view.color ? fmt::format("\x1b[30;{}m{}\x1b[0m", category_ansi_bg(c), g) : g) + " " + name;
    legend_len += len;
  }
  lines.push_back(legend);
  lines.push_back(bold(clip(fmt::format("{:>4} {:>7} {:>5} {:>9}  breakdown of the last {} steps", "RANK", "PID",
                                        "STEPS", "LAST ms", view.window_steps),
                            W)));

  const size_t prefix = 4 + 1 + 7 + 1 + 5 + 1 + 9 + 2;
  const size_t suffix = 12;  // " <- straggler"
  const size_t bar_w = W > prefix + suffix + 10 ? W - prefix - suffix : 10;
  for (const auto& rk : job.ranks) {
    CategoryNs sum{};
    uint64_t total = 0;
    size_t first = rk.steps.size() > static_cast<size_t>(view.window_steps)
                       ? rk.steps.size() - static_cast<size_t>(view.window_steps)
                       : 0;
    for (size_t i = first; i < rk.steps.size(); ++i)
      for (size_t c = 0; c < kCategories; ++c) {
        sum[c] += rk.steps[i].ns[c];
        total += rk.steps[i].ns[c];
      }
    std::string bar;
    size_t used = 0;
    for (size_t c = 0; c < kCategories && total > 0; ++c) {
      size_t n = static_cast<size_t>(static_cast<double>(sum[c]) / static_cast<double>(total) *
                                         static_cast<double>(bar_w) +
                                     0.5);
      n = std::min(n, bar_w - used);
      if (n == 0) continue;
      std::string seg(n, category_glyph(c));
      bar += view.color ? fmt::format("\x1b[30;{}m{}\x1b[0m", category_ansi_bg(c), seg) : seg;
      used += n;
    }
    if (used < bar_w) bar += std::string(bar_w - used, ' ');
    uint64_t last = rk.steps.empty() ? 0 : rk.steps.back().duration();
    std::string line = fmt::format("{:>4} {:>7} {:>5} {:>9.1f}  ", rk.rank, rk.pid, rk.steps_total,
                                   static_cast<double>(last) / 1e6) +
                       bar;
    if (rk.rank == job.verdict.straggler_rank)
      line += view.color ? " \x1b[1;31m<-straggler\x1b[0m" : " <-straggler";
    lines.push_back(line);
  }
  if (job.ranks.empty()) lines.emplace_back("  (no rank has driven the accelerator yet)");

  if (!job.verdict.evidence.empty()) {
    lines.emplace_back();
    lines.push_back(bold("evidence"));
    for (const auto& e : job.verdict.evidence) lines.push_back(clip("  - " + e, W));
  }
  lines.emplace_back();
  lines.push_back(clip(view.final_frame         ? "finished"
                       : !view.stopping.empty() ? view.stopping
                                                : "q or Ctrl-C quits (then prints the full report)",
                       W));

  const size_t H = static_cast<size_t>(std::max(5, view.height));
  if (lines.size() > H) lines.resize(H);
  std::string o;
  for (const auto& l : lines) o += l + "\n";
  return o;
}

}  // namespace steptrace
