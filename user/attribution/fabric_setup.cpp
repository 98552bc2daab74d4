// SPDX-License-Identifier: Apache-2.0
#include "attribution/fabric_setup.h"

#include <algorithm>
#include <map>

#include "attribution/job_analysis.h"

namespace steptrace {

void FabricPhase::add(const VerbInfo& v, const Span& s) {
  auto it = std::find_if(verbs.begin(), verbs.end(), [&](const VerbStats& x) { return x.name == v.name; });
  if (it == verbs.end()) {
    verbs.push_back(VerbStats{v.name, v.group});
    it = verbs.end() - 1;
  }
  const uint64_t d = s.end > s.start ? s.end - s.start : 0;
  ++it->calls;
  ++calls;
  if (s.ret < 0) {
    ++it->errors;
    ++errors;
  }
  it->total_ns += d;
  it->max_ns = std::max(it->max_ns, d);
  total_ns += d;
  if (v.group == VerbGroup::memory_registration && s.ret >= 0) {
    it->bytes += s.bytes;
    bytes += s.bytes;
  }
  if (!first_ns || s.start < first_ns) first_ns = s.start;
  last_ns = std::max(last_ns, s.end);
}

void FabricPhase::merge(const FabricPhase& o) {
  for (const auto& v : o.verbs) {
    auto it = std::find_if(verbs.begin(), verbs.end(), [&](const VerbStats& x) { return x.name == v.name; });
    if (it == verbs.end()) {
      verbs.push_back(v);
      continue;
    }
    it->calls += v.calls;
    it->errors += v.errors;
    it->total_ns += v.total_ns;
    it->max_ns = std::max(it->max_ns, v.max_ns);
    it->bytes += v.bytes;
  }
  calls += o.calls;
  errors += o.errors;
  total_ns += o.total_ns;
  bytes += o.bytes;
  if (o.first_ns && (!first_ns || o.first_ns < first_ns)) first_ns = o.first_ns;
  last_ns = std::max(last_ns, o.last_ns);
}

void merge_fabric(FabricSummary& into, const FabricSummary& more) {
  for (const auto& m : more.ranks) {
    auto it = std::find_if(into.ranks.begin(), into.ranks.end(), [&](const RankFabric& f) { return f.pid == m.pid; });
    if (it == into.ranks.end()) {
      into.ranks.push_back(m);
      continue;
    }
    if (m.rank >= 0) it->rank = m.rank;
    it->setup.merge(m.setup);
    it->in_steps.merge(m.in_steps);
    it->teardown.merge(m.teardown);
    it->counted_steps += m.counted_steps;
    it->counted_steps_with_calls += m.counted_steps_with_calls;
  }
  // Ranks first, then the other processes (as summarize_fabric orders them).
  std::stable_partition(into.ranks.begin(), into.ranks.end(), [](const RankFabric& f) { return f.rank >= 0; });
}

uint64_t FabricSummary::calls() const {
  uint64_t n = 0;
  for (const auto& r : ranks) n += r.setup.calls + r.in_steps.calls + r.teardown.calls;
  return n;
}

FabricSummary summarize_fabric(const TimelineStore& tl, std::vector<RankResult*>& ranks, int skip_warmup_steps,
                               const FabricWindow& w) {
  FabricSummary out;
  for (RankResult* r : ranks) {
    RankFabric f;
    f.rank = r->rank;
    f.pid = r->pid;
    std::pair<uint64_t, uint64_t> range{0, UINT64_MAX};
    if (auto it = w.rank_range.find(r->pid); it != w.rank_range.end()) range = it->second;
    std::vector<const Span*> calls;
    for (const auto& [key, t] : tl.threads()) {
      if (t.pid != r->pid) continue;
      for (const auto& s : t.spans)
        if (s.kind == SpanKind::rdma_verb && s.start >= range.first && s.start < range.second) calls.push_back(&s);
    }
    if (calls.empty()) continue;
    std::sort(calls.begin(), calls.end(), [](const Span* a, const Span* b) { return a->start < b->start; });
    const auto& steps = r->steps;
    for (const Span* s : calls) {
      VerbInfo v = rdma_verb_info(s->cmd >> 16, s->cmd & 0xffff, s->flags);
      if (steps.empty() || s->start < steps.front().start_ns) {
        f.setup.add(v, *s);
        continue;
      }
      if (s->start >= steps.back().end_ns) {
        f.teardown.add(v, *s);
        continue;
      }
      f.in_steps.add(v, *s);
      // The step it started in (steps are contiguous and sorted).
      auto it = std::upper_bound(steps.begin(), steps.end(), s->start,
                                 [](uint64_t x, const StepResult& st) { return x < st.start_ns; });
      if (it != steps.begin()) {
        auto& st = r->steps[static_cast<size_t>(std::prev(it) - steps.begin())];
        ++st.fabric_calls;
        st.fabric_ns += std::min(s->end, st.end_ns) - s->start;
        if (v.group == VerbGroup::memory_registration && s->ret >= 0) st.fabric_reg_bytes += s->bytes;
      }
    }
    for (const auto& st : steps) {
      if (st.index < skip_warmup_steps) continue;
      ++f.counted_steps;
      f.counted_steps_with_calls += st.fabric_calls > 0;
    }
    out.ranks.push_back(std::move(f));
  }
  // Processes that are not ranks (a launcher, a tool probing the adapter):
  // all their calls are setup, with no steps to place them in.
  std::map<uint32_t, std::vector<const Span*>> others;
  for (const auto& [key, t] : tl.threads()) {
    bool rank = false;
    for (const RankResult* r : ranks) rank = rank || r->pid == t.pid;
    if (rank) continue;
    for (const auto& s : t.spans)
      if (s.kind == SpanKind::rdma_verb && s.start >= w.others_from_ns && s.start < w.others_to_ns)
        others[t.pid].push_back(&s);
  }
  for (auto& [pid, calls] : others) {
    RankFabric f;
    f.rank = -1;
    f.pid = pid;
    std::sort(calls.begin(), calls.end(), [](const Span* a, const Span* b) { return a->start < b->start; });
    for (const Span* s : calls) f.setup.add(rdma_verb_info(s->cmd >> 16, s->cmd & 0xffff, s->flags), *s);
    out.ranks.push_back(std::move(f));
  }
  return out;
}

}  // namespace steptrace
