// SPDX-License-Identifier: Apache-2.0
#include "attribution/sample_classes.h"

#include <algorithm>

#include "timeline/timeline_ranges.h"

namespace steptrace {

const char* sample_role_name(SampleRole r) {
  switch (r) {
    case SampleRole::main: return "main thread";
    case SampleRole::loader: return "data loader";
    case SampleRole::preemptor: return "preempting the main thread";
    case SampleRole::helper: return "other thread of a rank";
    default: return "outside the steps";
  }
}

std::map<ProfileKey, uint64_t> CpuProfile::counts() const {
  std::map<ProfileKey, uint64_t> c = folded;
  for (const auto& s : samples)
    ++c[{static_cast<uint8_t>(s.category), static_cast<uint8_t>(s.role), s.stack}];
  return c;
}

uint64_t CpuProfile::total() const {
  uint64_t t = samples.size();
  for (const auto& [k, n] : folded) t += n;
  return t;
}

Category category_at(const std::vector<Paint>& paints, uint64_t ts, Category fallback) {
  const Paint* best = nullptr;
  for (const auto& p : paints) {
    if (p.start > ts || p.end <= ts) continue;
    if (!best || p.priority > best->priority || (p.priority == best->priority && p.start < best->start)) best = &p;
  }
  return best ? best->category : fallback;
}

namespace {

// The rank's main thread was runnable at ts, preempted by tid.
bool preempted_by(const steps::RankSteps& r, uint32_t tid, uint64_t ts) {
  if (!r.main) return false;
  auto g = segs_ending_after(*r.main, ts);
  return g != r.main->segs.end() && g->start <= ts && g->state == ThreadState::runnable && g->preempted_by == tid;
}

// Inside one of the rank's steps (the first step's start to the last one's end).
bool in_steps(const RankPaints& rp, uint64_t ts) {
  return !rp.steps.empty() && ts >= rp.steps.front().first && ts < rp.steps.back().second;
}

void classify_main(const SampleStore& store, const RankPaints& rp, int32_t rank, std::vector<ProfiledSample>& out,
                   std::vector<bool>& done) {
  const auto& v = store.samples();
  for (size_t k = 0; k < rp.steps.size(); ++k) {
    const uint64_t ws = rp.steps[k].first, we = rp.steps[k].second;
    auto it = std::partition_point(v.begin(), v.end(), [ws](const CpuSample& s) { return s.ts < ws; });
    for (; it != v.end() && it->ts < we; ++it) {
      const size_t i = static_cast<size_t>(it - v.begin());
      if (done[i] || it->tid != rp.rank->main_tid) continue;
      done[i] = true;
      out[i] = {it->ts, it->stack, category_at(rp.paints[k], it->ts), SampleRole::main, rank};
    }
  }
}

ProfiledSample classify_other(const CpuSample& s, const std::vector<RankPaints>& ranks) {
  ProfiledSample p{s.ts, s.stack, Category::other, SampleRole::outside, -1};
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& r = *ranks[i].rank;
    if (preempted_by(r, s.tid, s.ts) && in_steps(ranks[i], s.ts))
      return {s.ts, s.stack, Category::cpu_contention, SampleRole::preemptor, r.rank};
  }
  for (const auto& rp : ranks) {
    const auto& r = *rp.rank;
    const bool loader = r.loaders.count(s.tid) ||
                        std::find(r.loader_tids.begin(), r.loader_tids.end(), s.tid) != r.loader_tids.end() ||
                        std::find(r.loader_pids.begin(), r.loader_pids.end(), s.pid) != r.loader_pids.end();
    if (loader && s.pid != r.pid)  // a worker process: all its time feeds the rank
      return {s.ts, s.stack, Category::data_loading, SampleRole::loader, r.rank};
    if (s.pid != r.pid) continue;
    if (s.tid == r.main_tid) return p;  // the main thread outside its steps
    if (loader) return {s.ts, s.stack, Category::data_loading, SampleRole::loader, r.rank};
    if (r.comm_threads.count(s.tid)) return {s.ts, s.stack, Category::collective, SampleRole::helper, r.rank};
    return {s.ts, s.stack, Category::other, SampleRole::helper, r.rank};
  }
  return p;
}

}  // namespace

bool has_sample_of(const SampleStore& store, uint32_t tid, uint64_t from, uint64_t to) {
  const auto& v = store.samples();
  auto it = std::partition_point(v.begin(), v.end(), [from](const CpuSample& s) { return s.ts < from; });
  for (; it != v.end() && it->ts < to; ++it)
    if (it->tid == tid) return true;
  return false;
}

std::vector<ProfiledSample> classify_samples(const SampleStore& store, const std::vector<RankPaints>& ranks) {
  const auto& v = store.samples();
  std::vector<ProfiledSample> out(v.size());
  std::vector<bool> done(v.size(), false);
  for (size_t i = 0; i < ranks.size(); ++i) classify_main(store, ranks[i], ranks[i].rank->rank, out, done);
  for (size_t i = 0; i < v.size(); ++i)
    if (!done[i]) out[i] = classify_other(v[i], ranks);
  return out;
}

}  // namespace steptrace
