// SPDX-License-Identifier: Apache-2.0
#include "attribution/what_if_model.h"

#include <algorithm>

#include "attribution/step_pairing.h"

namespace steptrace {

namespace {

constexpr size_t kColl = static_cast<size_t>(Category::collective);

// Fills a step's own paths and collective times from its members' categories.
void measure(PathStep& p) {
  for (const StepResult* st : p.st) {
    const double coll = static_cast<double>(std::min(st->ns[kColl], st->duration()));
    p.coll.push_back(coll);
    p.own.push_back(static_cast<double>(st->duration()) - coll);
  }
  // The last rank to arrive waits for nobody: its collective time is the
  // transfer, which stays whoever arrives last.
  if (p.coupled) p.transfer = p.coll[p.last()];
}

}  // namespace

size_t PathStep::last() const {
  return static_cast<size_t>(std::max_element(own.begin(), own.end()) - own.begin());
}

double PathStep::cost() const {
  if (own.empty()) return 0;
  if (coupled) return static_cast<double>(own.size()) * (own[last()] + transfer);
  double sum = 0;
  for (size_t m = 0; m < own.size(); ++m) sum += own[m] + coll[m];
  return sum;
}

std::vector<PathStep> path_steps(const JobAnalysis& job) {
  std::vector<PathStep> out;
  const int skip = job.skipped_warmup_steps;
  std::vector<std::vector<bool>> used;
  std::vector<std::vector<uint64_t>> ends;
  for (const auto& r : job.ranks) {
    used.emplace_back(r.steps.size(), false);
    ends.emplace_back();
    for (const auto& st : r.steps) ends.back().push_back(st.end_ns);
  }
  // The same collective instance on every rank: coupled where cross_rank
  // found that a collective holds them together.
  if (job.ranks.size() >= 2) {
    const std::vector<long> shift = pair_by_end(ends);
    for (size_t k = 0; k < ends[0].size(); ++k) {
      PathStep p;
      std::vector<size_t> idx;
      for (size_t i = 0; i < job.ranks.size(); ++i) {
        const size_t j = paired_index(k, shift[i], job.ranks[i].steps.size());
        if (j == kUnpaired || job.ranks[i].steps[j].index < skip) break;
        p.st.push_back(&job.ranks[i].steps[j]);
        p.rank.push_back(i);
        idx.push_back(j);
      }
      if (p.st.size() != job.ranks.size()) continue;
      p.coupled = std::all_of(p.st.begin(), p.st.end(), [](const StepResult* s) { return s->coupled; });
      if (!p.coupled) continue;  // its members go alone, below
      for (size_t m = 0; m < idx.size(); ++m) used[p.rank[m]][idx[m]] = true;
      measure(p);
      out.push_back(std::move(p));
    }
  }
  // Everything else: each counted step on its own path.
  for (size_t i = 0; i < job.ranks.size(); ++i)
    for (size_t j = 0; j < job.ranks[i].steps.size(); ++j) {
      const StepResult& st = job.ranks[i].steps[j];
      if (used[i][j] || st.index < skip) continue;
      PathStep p;
      p.st.push_back(&st);
      p.rank.push_back(i);
      measure(p);
      out.push_back(std::move(p));
    }
  return out;
}

Saving saving_of(const std::vector<PathStep>& steps, const PathChange& change) {
  Saving s;
  PathStep changed;  // one scratch step: assignment reuses its vectors' storage
  for (const PathStep& base : steps) {
    changed = base;
    change(changed);
    for (double& w : changed.own) w = std::max(w, 0.0);
    for (double& c : changed.coll) c = std::max(c, 0.0);
    changed.transfer = std::max(changed.transfer, 0.0);
    const double saved = base.cost() - changed.cost();
    s.ns += saved;
    if (saved > 100'000.0 * static_cast<double>(base.st.size())) ++s.steps;
  }
  return s;
}

}  // namespace steptrace
