// SPDX-License-Identifier: Apache-2.0
#include "pipeline/step_ledger.h"

#include <algorithm>
#include <vector>

#include "util/intervals.h"

namespace steptrace {

namespace {

void add_unique(std::vector<uint32_t>& into, const std::vector<uint32_t>& more) {
  for (uint32_t v : more)
    if (std::find(into.begin(), into.end(), v) == into.end()) into.push_back(v);
}

// The identity of a rank from its latest window.
void take_identity(RankResult& into, const RankResult& r) {
  into.pid = r.pid;
  into.main_tid = r.main_tid;
  if (!r.comm.empty()) into.comm = r.comm;
  into.source = r.source;
  add_unique(into.loader_pids, r.loader_pids);
  add_unique(into.loader_tids, r.loader_tids);
  if (r.numa.device >= 0) into.numa = r.numa;
}

// Proxy threads named by any window, once each (bounded: a job's own threads).
constexpr size_t kMaxProxies = 256;

void add_proxies(std::vector<signals::ProxyThread>& into, const std::vector<signals::ProxyThread>& more) {
  for (const auto& p : more) {
    auto same = [&](const signals::ProxyThread& q) { return q.pid == p.pid && q.tid == p.tid; };
    if (into.size() < kMaxProxies && std::find_if(into.begin(), into.end(), same) == into.end()) into.push_back(p);
  }
}

void add_counts(RankResult& into, const RankResult& r) {
  into.steps_total += r.steps_total;
  into.counted_steps += r.counted_steps;
  for (size_t c = 0; c < kCategories; ++c) into.total[c] += r.total[c];
  into.counted_ns += r.counted_ns;
  into.straggler_steps += r.straggler_steps;
}

// How many steps of each rank are over: a rank still stepping keeps its last
// two (the one in progress and the one before, whose end the next window may
// still move); all ranks still stepping fold the same number, so the next
// window compares them step by step as this one did. A rank that stopped
// (no step ended for four typical steps) folds all of its steps; one whose
// steps are not settled yet folds none, and holds the others back with it.
constexpr size_t kSettleSteps = 64;

std::vector<size_t> steps_over(const JobAnalysis& ja, uint64_t now) {
  std::vector<uint64_t> durs;
  for (const auto& r : ja.ranks)
    for (const auto& s : r.steps) durs.push_back(s.duration());
  const uint64_t typical = median_ns(durs);
  std::vector<size_t> n(ja.ranks.size(), 0);
  size_t common = SIZE_MAX;
  std::vector<bool> active(ja.ranks.size(), false), settled(ja.ranks.size(), true);
  for (size_t i = 0; i < ja.ranks.size(); ++i) {
    const auto& s = ja.ranks[i].steps;
    if (s.empty()) continue;
    active[i] = s.back().end_ns + 4 * typical >= now;
    // A CPU-only rank whose steps do not agree yet (a window of set-up
    // traffic, or too few steps) may be cut differently once more of the
    // job is seen: nothing folds until they do.
    // Bounded: a job whose traffic never agrees (collectives of other sizes
    // every step) folds anyway once the window holds kSettleSteps of its
    // steps, or its timeline would grow until the memory cap forgot it.
    settled[i] = !ja.ranks[i].host_only || ja.ranks[i].burst.known() || s.size() >= kSettleSteps;
    if (active[i] || !settled[i]) common = std::min(common, s.size() >= 2 && settled[i] ? s.size() - 2 : 0);
  }
  for (size_t i = 0; i < ja.ranks.size(); ++i)
    n[i] = !settled[i] ? 0 : active[i] ? common : ja.ranks[i].steps.size();
  return n;
}

}  // namespace

AnalysisOptions StepLedger::resume(AnalysisOptions base) const {
  for (const auto& [pid, L] : ranks_) base.resume[pid] = L.next;
  base.others_from_ns = others_from_ns_;
  base.known_proxies = &proxies_;
  return base;
}

uint64_t StepLedger::fold(const JobAnalysis& ja, const TimelineStore& tl, uint64_t now) {
  const std::vector<size_t> n = steps_over(ja, now);
  size_t folding = 0;
  for (size_t c : n) folding += c;
  if (!folding) return 0;
  // The timeline is kept from the start of each rank's last folded step:
  // the next window finds its first step's boundary from the execution before.
  uint64_t keep_from = now;
  for (size_t i = 0; i < ja.ranks.size(); ++i) {
    const auto& s = ja.ranks[i].steps;
    if (s.empty()) continue;
    keep_from = std::min(keep_from, n[i] ? s[n[i] - 1].start_ns : s.front().start_ns);
  }
  if (!keep_from) return 0;

  // The EFA control path of the part folded: calls up to each rank's cut.
  FabricWindow w;
  w.others_from_ns = others_from_ns_;
  w.others_to_ns = keep_from;
  std::vector<RankResult> part;
  part.reserve(ja.ranks.size());
  for (size_t i = 0; i < ja.ranks.size(); ++i) {
    const RankResult& r = ja.ranks[i];
    RankResult p;
    p.rank = r.rank;
    p.pid = r.pid;
    p.steps.assign(r.steps.begin(), r.steps.begin() + static_cast<std::ptrdiff_t>(n[i]));
    for (auto& st : p.steps) st.fabric_calls = 0, st.fabric_ns = 0, st.fabric_reg_bytes = 0;
    const auto it = ranks_.find(r.pid);
    const uint64_t from = it != ranks_.end() ? it->second.next.cut_ns : 0;
    const uint64_t to = n[i] == 0                ? from
                        : n[i] < r.steps.size()  ? r.steps[n[i]].start_ns
                                                 : r.steps.back().end_ns;
    w.rank_range[r.pid] = {from, to};
    part.push_back(std::move(p));
  }
  std::vector<RankResult*> pr;
  for (auto& p : part) pr.push_back(&p);
  merge_fabric(fabric_, summarize_fabric(tl, pr, ja.skipped_warmup_steps, w));
  add_proxies(proxies_, ja.signals.proxies);

  for (size_t i = 0; i < ja.ranks.size(); ++i) {
    if (!n[i]) continue;
    const RankResult& r = ja.ranks[i];
    RankLedger& L = ranks_[r.pid];
    take_identity(L.res, r);
    for (size_t k = 0; k < n[i]; ++k) {
      const StepResult& st = r.steps[k];
      ++L.res.steps_total;
      L.res.straggler_steps += st.straggler;
      if (st.index >= ja.skipped_warmup_steps) {
        ++L.res.counted_steps;
        for (size_t c = 0; c < kCategories; ++c) L.res.total[c] += st.ns[c];
        L.res.counted_ns += st.duration();
      }
      L.recent.push_back(st);
      if (L.recent.size() > keep_steps_) {
        const StepResult& old = L.recent.front();
        if (old.index >= ja.skipped_warmup_steps) {
          out_of_detail_dist_.step.add(old.duration());
          for (size_t c = 0; c < kCategories; ++c) out_of_detail_dist_.category[c].add(old.ns[c]);
        }
        L.recent.pop_front();
        ++out_of_detail_;
      }
    }
    L.next.cut_ns = n[i] < r.steps.size() ? r.steps[n[i]].start_ns : r.steps.back().end_ns;
    if (r.burst.known()) L.next.burst = r.burst;
    L.next.next_index = r.steps[n[i] - 1].index + 1;
  }
  others_from_ns_ = keep_from;
  ++folds_;
  return keep_from;
}

JobAnalysis StepLedger::merge(JobAnalysis tail) const {
  std::map<uint32_t, RankResult> by_pid;
  for (const auto& [pid, L] : ranks_) {
    RankResult r = L.res;
    r.steps.assign(L.recent.begin(), L.recent.end());
    by_pid[pid] = std::move(r);
  }
  for (auto& t : tail.ranks) {
    auto it = by_pid.find(t.pid);
    if (it == by_pid.end()) {
      by_pid[t.pid] = std::move(t);
      continue;
    }
    RankResult& r = it->second;
    take_identity(r, t);
    add_counts(r, t);
    r.steps.insert(r.steps.end(), t.steps.begin(), t.steps.end());
  }
  JobAnalysis out = std::move(tail);
  out.ranks.clear();
  std::map<uint32_t, int> rank_of;
  std::array<uint64_t, kCategories> sum{};
  uint64_t total = 0;
  for (auto& [pid, r] : by_pid) {
    r.rank = static_cast<int>(out.ranks.size());
    rank_of[pid] = r.rank;
    for (size_t c = 0; c < kCategories; ++c) sum[c] += r.total[c];
    total += r.counted_ns;
    out.ranks.push_back(std::move(r));
  }
  for (size_t c = 0; c < kCategories; ++c)
    out.mean_share[c] = total ? static_cast<double>(sum[c]) / static_cast<double>(total) : 0;
  FabricSummary f = fabric_;
  merge_fabric(f, out.fabric);
  for (auto& rf : f.ranks)
    if (auto it = rank_of.find(rf.pid); it != rank_of.end()) rf.rank = it->second;
  out.fabric = std::move(f);
  // The device signals' step totals are summed again over the merged steps
  // (resummarize_device_signals, with the thread table); the proxies first.
  std::vector<signals::ProxyThread> proxies = proxies_;
  add_proxies(proxies, out.signals.proxies);
  out.signals.proxies = std::move(proxies);
  out.out_of_detail = out_of_detail_dist_;
  return out;
}

size_t StepLedger::memory_bytes() const {
  size_t n = 0;
  for (const auto& [pid, L] : ranks_) n += sizeof(RankLedger) + L.recent.size() * sizeof(StepResult);
  n += out_of_detail_dist_.step.bins().size() * 48 * (1 + kCategories);
  return n;
}

}  // namespace steptrace
