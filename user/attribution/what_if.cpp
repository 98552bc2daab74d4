// SPDX-License-Identifier: Apache-2.0
#include "attribution/what_if.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <map>

#include "attribution/what_if_model.h"

namespace steptrace {

namespace {

constexpr double kHelpsPct = 1.0;     // a fix worth naming saves 1 % of the step or more
constexpr double kLargeShare = 0.10;  // a cost worth a "would not help" note: a tenth of a rank's step
constexpr size_t kMaxHelps = 8;
constexpr std::array kFixable = {Category::data_loading, Category::dma_submission, Category::host_overhead,
                                 Category::cpu_contention};
constexpr size_t kEvery = static_cast<size_t>(-1);

double ms(double ns) { return ns / 1e6; }
size_t at(Category c) { return static_cast<size_t>(c); }

// What the fixes are judged against, and per-rank facts for the reasons.
struct Ctx {
  const JobAnalysis& job;
  std::vector<PathStep> steps;
  double members = 0;  // member steps (counted steps of all ranks)
  double step_ns = 0;  // their mean duration
  size_t coupled = 0;  // path steps a collective couples
};

// A rank's counted steps kept in detail: mean duration, category and loaders' busy time.
struct RankMeans {
  double step_ns = 0, loader_busy_ns = 0;
  CategoryNs ns{};
  size_t steps = 0;
  double share(Category c) const { return step_ns > 0 ? static_cast<double>(ns[at(c)]) / steps / step_ns : 0; }
  double per_step(Category c) const { return steps ? static_cast<double>(ns[at(c)]) / steps : 0; }
};

RankMeans means_of(const Ctx& c, size_t ri) {
  RankMeans m;
  for (const auto& st : c.job.ranks[ri].steps) {
    if (st.index < c.job.skipped_warmup_steps) continue;
    ++m.steps;
    m.step_ns += static_cast<double>(st.duration());
    m.loader_busy_ns += static_cast<double>(st.loader_busy_ns);
    for (size_t k = 0; k < kCategories; ++k) m.ns[k] += st.ns[k];
  }
  if (m.steps) {
    m.step_ns /= static_cast<double>(m.steps);
    m.loader_busy_ns /= static_cast<double>(m.steps);
  }
  return m;
}

// Where rank ri stands in the coupled steps: how often it is last, by how
// much the others arrive later on average, and who is last most often
// among the others.
struct Standing {
  size_t steps = 0, last = 0;
  double slack_ns = 0;
  int usual_last = -1;
};

Standing standing_of(const Ctx& c, size_t ri) {
  Standing s;
  std::map<size_t, size_t> last_by;
  for (const PathStep& p : c.steps) {
    if (!p.coupled) continue;
    const auto me = std::find(p.rank.begin(), p.rank.end(), ri);
    if (me == p.rank.end()) continue;
    const size_t m = static_cast<size_t>(me - p.rank.begin());
    ++s.steps;
    const size_t l = p.last();
    if (l == m) {
      ++s.last;
      continue;
    }
    ++last_by[p.rank[l]];
    s.slack_ns += p.own[l] - p.own[m];
  }
  if (s.steps) s.slack_ns /= static_cast<double>(s.steps);
  size_t best = 0;
  for (const auto& [r, n] : last_by)
    if (n > best) best = n, s.usual_last = c.job.ranks[r].rank;
  return s;
}

WhatIf make(const Ctx& c, WhatIfKind kind, size_t ri, std::optional<Category> cat, std::string fix,
            const Saving& s) {
  WhatIf w;
  w.kind = kind;
  w.rank = ri == kEvery ? -1 : c.job.ranks[ri].rank;
  w.category = cat;
  w.fix = std::move(fix);
  w.saving_ns = c.members > 0 ? s.ns / c.members : 0;
  w.saving_pct = c.step_ns > 0 ? 100.0 * w.saving_ns / c.step_ns : 0;
  w.predicted_step_ns = c.step_ns - w.saving_ns;
  w.helps = w.saving_pct >= kHelpsPct;
  return w;
}

// What goes when a category's work goes: its time and the waits for a CPU
// inside it (a copy's ioctl, the wake-up from a wait for a batch); of DMA
// submission, the copies, not the submission of executions (every
// execution needs its descriptors and queue kicks).
double removable(const StepResult& st, Category cat) {
  if (cat == Category::cpu_contention) return static_cast<double>(st.ns[at(cat)]);
  uint64_t ns = st.ns[at(cat)] + st.contention_under[at(cat)];
  if (cat == Category::dma_submission) ns -= std::min(ns, st.exec_submit_ns);
  return static_cast<double>(ns);
}

std::string fix_words(Category cat) {
  return cat == Category::dma_submission ? std::string("remove the host-device copies (dma_submission)")
                                         : fmt::format("remove {}", category_name(cat));
}

PathChange remove_on(size_t ri, Category cat) {
  return [ri, cat](PathStep& p) {
    for (size_t m = 0; m < p.st.size(); ++m)
      if (ri == kEvery || p.rank[m] == ri) p.own[m] -= removable(*p.st[m], cat);
  };
}

std::string rank_words(const Ctx& c, size_t ri) {
  return ri == kEvery ? std::string("every rank") : fmt::format("rank {}", c.job.ranks[ri].rank);
}

// Why removing a category on rank ri helps (s: the steps it saved in).
std::string helps_because(const Ctx& c, size_t ri, const Saving& s) {
  if (c.job.ranks.size() == 1) return "one rank: its step is its own path";
  if (ri == kEvery)
    return c.coupled ? fmt::format("shortens the last rank's path to the collective in {} of {} steps", s.steps,
                                   c.steps.size())
                     : "no collective couples the ranks: each rank's step is its own path";
  const Standing st = standing_of(c, ri);
  if (st.steps == 0) return "no collective couples the ranks: each rank's step is its own path";
  return fmt::format("on the critical path: rank {} is last at the collective in {} of {} steps and the others wait "
                     "for it",
                     c.job.ranks[ri].rank, st.last, st.steps);
}

// Why removing a large category on rank ri would not help.
std::string off_path_because(const Ctx& c, size_t ri) {
  const Standing st = standing_of(c, ri);
  if (st.steps == 0) return "it saves less than 1 % of the step";
  return fmt::format("off the critical path: {} arrives later at the collective, by {:.1f} ms per step on average "
                     "(rank {} is last in {} of {} steps)",
                     st.usual_last >= 0 ? fmt::format("rank {}", st.usual_last) : std::string("another rank"),
                     ms(st.slack_ns), c.job.ranks[ri].rank, st.last, st.steps);
}

// Each fixable category removed on each rank, then on every rank; notes
// for the large ones that would not help.
void remove_categories(const Ctx& c, std::vector<WhatIf>& helps, std::vector<WhatIf>& notes) {
  const size_t n = c.job.ranks.size();
  for (Category cat : kFixable) {
    double best_single = 0;
    for (size_t ri = 0; ri < n; ++ri) {
      const Saving s = saving_of(c.steps, remove_on(ri, cat));
      WhatIf w = make(c, WhatIfKind::remove_category, ri, cat,
                      fmt::format("{} on {}", fix_words(cat), rank_words(c, ri)), s);
      best_single = std::max(best_single, w.saving_ns);
      const RankMeans m = means_of(c, ri);
      if (w.helps) {
        w.reason = helps_because(c, ri, s);
        helps.push_back(std::move(w));
      } else if (m.share(cat) >= kLargeShare) {
        w.reason = off_path_because(c, ri);
        notes.push_back(std::move(w));
      } else if (cat == Category::data_loading && m.step_ns > 0 && m.loader_busy_ns >= kLargeShare * m.step_ns) {
        // Slow loaders that keep ahead: the main thread hardly waits for them.
        const auto& r = c.job.ranks[ri];
        const size_t workers = r.loader_pids.empty() ? r.loader_tids.size() : r.loader_pids.size();
        w.reason = fmt::format("off the critical path: rank {}'s loaders work {:.1f} ms per {:.1f} ms step ({} "
                               "loader worker{}) but keep ahead of the main thread (prefetch): it waits {:.2f} ms "
                               "per step for batches",
                               r.rank, ms(m.loader_busy_ns), ms(m.step_ns), workers, workers == 1 ? "" : "s",
                               ms(m.per_step(Category::data_loading)));
        notes.push_back(std::move(w));
      }
    }
    if (n < 2) continue;
    const Saving s = saving_of(c.steps, remove_on(kEvery, cat));
    WhatIf w = make(c, WhatIfKind::remove_category, kEvery, cat,
                    fmt::format("{} on every rank", fix_words(cat)), s);
    // One rank's fix that does nearly as much says more.
    if (w.helps && best_single < 0.9 * w.saving_ns) {
      w.reason = helps_because(c, kEvery, s);
      helps.push_back(std::move(w));
    }
  }
}

// The verdict's straggler at the median of the other ranks' own paths.
void straggler_to_median(const Ctx& c, std::vector<WhatIf>& helps) {
  const int sr = c.job.verdict.straggler_rank;
  if (sr < 0 || c.job.ranks.size() < 2) return;
  size_t si = kEvery;
  for (size_t i = 0; i < c.job.ranks.size(); ++i)
    if (c.job.ranks[i].rank == sr) si = i;
  if (si == kEvery) return;
  const Saving s = saving_of(c.steps, [si](PathStep& p) {
    std::vector<double> others;
    size_t me = p.st.size();
    for (size_t m = 0; m < p.st.size(); ++m)
      if (p.rank[m] == si) me = m;
      else others.push_back(p.own[m]);
    if (me == p.st.size() || others.empty()) return;
    std::nth_element(others.begin(), others.begin() + static_cast<long>(others.size() / 2), others.end());
    p.own[me] = std::min(p.own[me], others[others.size() / 2]);
  });
  WhatIf w = make(c, WhatIfKind::straggler_to_median, si, std::nullopt,
                  fmt::format("bring rank {} to the median of the other ranks", sr), s);
  if (!w.helps) return;
  const Standing st = standing_of(c, si);
  w.reason = fmt::format("rank {} is last at the collective in {} of {} steps; the others wait for it", sr, st.last,
                         st.steps);
  helps.push_back(std::move(w));
}

// DMA submission hidden behind device compute on every rank.
void dma_overlapped(const Ctx& c, std::vector<WhatIf>& helps) {
  const Saving s = saving_of(c.steps, [](PathStep& p) {
    for (size_t m = 0; m < p.st.size(); ++m)
      p.own[m] -= std::min(removable(*p.st[m], Category::dma_submission),
                           static_cast<double>(p.st[m]->ns[at(Category::device_execute)]));
  });
  WhatIf w = make(c, WhatIfKind::dma_overlapped, kEvery, Category::dma_submission,
                  "overlap the host-device copies with device compute on every rank", s);
  if (!w.helps) return;
  w.reason = "copies for the next step while the device computes: the step keeps the longer of the two";
  helps.push_back(std::move(w));
}

// The collective's transfer at the link rate (EFA counters): the measured
// rate against the link's (signals' network ratio).
void collective_at_link_rate(const Ctx& c, std::vector<WhatIf>& helps, std::vector<WhatIf>& notes) {
  const auto& S = c.job.signals;
  if (!S.efa.available || S.net_ratio <= 0 || S.link_gbit <= 0) return;
  const double ratio = std::min(S.net_ratio, 1.0);
  const Saving s = saving_of(c.steps, [ratio](PathStep& p) {
    p.transfer *= ratio;
    if (!p.coupled)
      for (double& t : p.coll) t *= ratio;
  });
  WhatIf w = make(c, WhatIfKind::collective_at_link_rate, kEvery, Category::collective,
                  "run the collective at the link rate", s);
  w.reason = fmt::format("its transfer reaches {:.0f} % of the {:.1f} Gbit/s link", 100 * ratio, S.link_gbit);
  if (w.helps) helps.push_back(std::move(w));
  else if (c.job.mean_share[at(Category::collective)] >= kLargeShare) {
    w.reason += "; the rest of the collective is waiting for other ranks";
    notes.push_back(std::move(w));
  }
}

}  // namespace

WhatIfReport what_if(const JobAnalysis& job) {
  WhatIfReport out;
  Ctx c{job, path_steps(job)};
  for (const PathStep& p : c.steps) {
    c.members += static_cast<double>(p.st.size());
    c.coupled += p.coupled;
    if (p.coupled) out.coupled_steps += p.st.size();
    for (const StepResult* st : p.st) c.step_ns += static_cast<double>(st->duration());
  }
  if (c.members == 0) return out;
  c.step_ns /= c.members;
  out.step_ns = c.step_ns;
  out.steps = static_cast<uint64_t>(c.members);
  std::vector<WhatIf> helps, notes;
  remove_categories(c, helps, notes);
  straggler_to_median(c, helps);
  dma_overlapped(c, helps);
  collective_at_link_rate(c, helps, notes);
  std::stable_sort(helps.begin(), helps.end(),
                   [](const WhatIf& a, const WhatIf& b) { return a.saving_ns > b.saving_ns; });
  if (helps.size() > kMaxHelps) helps.resize(kMaxHelps);
  out.items = std::move(helps);
  for (auto& w : notes) out.items.push_back(std::move(w));
  return out;
}

void annotate_verdict_with_what_if(JobAnalysis& job) {
  const WhatIfReport& w = job.what_if;
  Verdict& v = job.verdict;
  if (!w.steps) return;
  if (!w.items.empty() && w.items.front().helps) {
    const WhatIf& top = w.items.front();
    v.evidence.push_back(fmt::format("what-if: {} -> step -{:.1f} ms (-{:.0f} %), {:.1f} -> {:.1f} ms; {}", top.fix,
                                     ms(top.saving_ns), top.saving_pct, ms(w.step_ns), ms(top.predicted_step_ns),
                                     top.reason));
    // The advice names the verdict's category, or the straggler's own cause.
    const bool same_target = (top.category && *top.category == v.category) ||
                             (v.straggler_rank >= 0 && top.rank == v.straggler_rank);
    if (same_target && !v.recommendation.empty())
      v.recommendation += fmt::format(" (what-if: step -{:.1f} ms, -{:.0f} %)", ms(top.saving_ns), top.saving_pct);
  } else {
    v.evidence.push_back("what-if: no single fix saves 1 % of the step or more");
  }
  // One cost that would not help: the verdict's own category if it is one
  // (the largest share, off the critical path), else the first.
  const WhatIf* note = nullptr;
  for (const auto& n : w.items)
    if (!n.helps && (!note || (n.category == v.category && note->category != v.category))) note = &n;
  if (note) v.evidence.push_back(fmt::format("what-if: would not help: {}: {}", note->fix, note->reason));
}

}  // namespace steptrace
