// SPDX-License-Identifier: Apache-2.0
#include "steps/anchors.h"

#include <algorithm>
#include <cmath>

#include "steps/span_classes.h"
#include "timeline/timeline_ranges.h"
#include "util/intervals.h"

namespace steptrace::steps {

// Execution anchors when no runtime probe fired: a burst of queue kicks
// starts an execution; the completion acknowledgement (or the next host
// activity on the device) ends it. Between them the runtime busy-polls.
std::vector<Anchor> anchors_from_ioctls(const ThreadTimeline& t) {
  std::vector<Anchor> out;
  const auto& sp = t.spans;
  size_t i = 0;
  while (i < sp.size()) {
    if (!is_kick(sp[i])) {
      ++i;
      continue;
    }
    Anchor a{sp[i].start, sp[i].end};
    size_t j = i + 1;
    while (j < sp.size() && (is_kick(sp[j]) || !(sp[j].kind == SpanKind::ioctl))) {
      if (is_kick(sp[j])) a.end = sp[j].end;
      ++j;
    }
    // The execution lasts until the acknowledgement, or the next ioctl.
    if (j < sp.size()) a.end = is_ack(sp[j]) ? sp[j].end : sp[j].start;
    out.push_back(a);
    i = j + (j < sp.size() && is_ack(sp[j]) ? 1 : 0);
  }
  return out;
}

namespace {

// Calls of a rank's threads closer than this belong to one burst.
constexpr uint64_t kFineSplitNs = 2'000'000;
// Between two steps' collectives the main thread always works (optimizer,
// the next batch, forward, backward until the first gradients are ready):
// far more than this. Inside one collective (a transfer paced by the peer or
// the link, the set-up broadcast of the parameters) it waits.
constexpr uint64_t kMinStepWorkNs = 200'000;
// A model is learned from at least this many step-sized groups whose bytes
// vary by at most this much (coefficient of variation).
constexpr size_t kLearnMinSteps = 6;
constexpr double kLearnMaxCv = 0.1;

// One stretch of the rank's traffic; a group of them covers fine bursts
// [first, last].
struct Burst {
  uint64_t start = 0, end = 0, bytes = 0;
  size_t first = 0, last = 0;
};

// The main thread's work (running or waiting for a CPU) in [a, b).
uint64_t main_work_ns(const ThreadTimeline& t, uint64_t a, uint64_t b) {
  uint64_t n = 0;
  for (auto it = segs_ending_after(t, a); it != t.segs.end() && it->start < b; ++it)
    if (it->state == ThreadState::running || it->state == ThreadState::runnable)
      n += std::min(b, it->end) - std::max(a, it->start);
  return n;
}

// Calls (sorted by start) in bursts: a call less than kFineSplitNs after the
// burst's end, or after a gap in which the main thread did not work, joins it.
std::vector<Burst> fine_bursts(const std::vector<const Span*>& spans, const ThreadTimeline& main) {
  std::vector<Burst> out;
  for (const Span* sp : spans) {
    if (!out.empty() && (sp->start <= out.back().end + kFineSplitNs ||
                         main_work_ns(main, out.back().end, sp->start) < kMinStepWorkNs)) {
      out.back().end = std::max(out.back().end, sp->end);
      out.back().bytes += sp->bytes;
      continue;
    }
    out.push_back({sp->start, sp->end, sp->bytes, out.size(), out.size()});
  }
  return out;
}

// Bursts grouped: one less than `split` after the group's end joins it.
std::vector<Burst> group_bursts(const std::vector<Burst>& fine, uint64_t split) {
  std::vector<Burst> out;
  for (const Burst& b : fine) {
    if (!out.empty() && b.start <= out.back().end + split) {
      out.back().end = std::max(out.back().end, b.end);
      out.back().bytes += b.bytes;
      out.back().last = b.last;
      continue;
    }
    out.push_back(b);
  }
  return out;
}

// A group that carries the bytes of n >= 2 steps (a gap between steps came
// out shorter than the split) is cut back into n at the gaps between its
// fine bursts where the bytes so far come closest to 1/n, 2/n... of its own.
std::vector<Burst> split_oversized(const std::vector<Burst>& groups, const std::vector<Burst>& fine,
                                   uint64_t step_bytes) {
  std::vector<Burst> out;
  for (const Burst& g : groups) {
    const uint64_t n = (g.bytes + step_bytes / 2) / step_bytes;
    if (n < 2 || g.last == g.first) {
      out.push_back(g);
      continue;
    }
    Burst cur = fine[g.first];
    uint64_t before = 0;  // bytes of the group before cur
    uint64_t part = 1;
    for (size_t i = g.first + 1; i <= g.last; ++i) {
      const uint64_t at = before + cur.bytes;  // bytes before fine burst i
      const double target = static_cast<double>(g.bytes) * static_cast<double>(part) / static_cast<double>(n);
      const double next_at = static_cast<double>(at + fine[i].bytes);
      // Cut before i when the bytes so far are nearer the target than they
      // would be with fine burst i added.
      if (part < n && std::fabs(static_cast<double>(at) - target) <= std::fabs(next_at - target)) {
        out.push_back(cur);
        before = at;
        cur = fine[i];
        ++part;
        continue;
      }
      cur.end = std::max(cur.end, fine[i].end);
      cur.bytes += fine[i].bytes;
      cur.last = fine[i].last;
    }
    out.push_back(cur);
  }
  return out;
}

// The groups that are step-sized: not far smaller than a step (store
// keep-alives, the final barrier, the shutdown).
std::vector<Burst> step_sized(const std::vector<Burst>& g, uint64_t step_bytes) {
  std::vector<Burst> keep;
  for (const Burst& b : g)
    if (b.bytes * 4 >= step_bytes) keep.push_back(b);
  return keep;
}

uint64_t median_bytes(const std::vector<Burst>& g) {
  std::vector<uint64_t> v;
  for (const Burst& b : g) v.push_back(b.bytes);
  return median_ns(v);
}

// Under load a peer's delay can stretch a gap inside a step past the gaps
// between steps (and a rate-limited link paces one all-reduce into pieces
// further apart than the steps): such a split step shows as neighbouring
// groups whose bytes add up to one step: merged.
std::vector<Burst> merge_split_steps(const std::vector<Burst>& g, uint64_t step_bytes) {
  const double per_step = static_cast<double>(step_bytes);
  std::vector<Burst> out;
  for (size_t i = 0; i < g.size(); ++i) {
    Burst b = g[i];
    double sum = static_cast<double>(b.bytes);
    while (sum < 0.9 * per_step && i + 1 < g.size() && sum + static_cast<double>(g[i + 1].bytes) <= 1.1 * per_step) {
      sum += static_cast<double>(g[++i].bytes);
      b.end = std::max(b.end, g[i].end);
      b.bytes += g[i].bytes;
      b.last = g[i].last;
    }
    out.push_back(b);
  }
  return out;
}

// A group's last fine bursts that together carry less than this share of
// its bytes are its tail.
constexpr double kTailShare = 0.01;

// A tail that few groups have is traffic of the next step that the grouping
// took in: DDP broadcasts its rebuilt bucket order early in the second
// iteration's forward, a few hundred bytes, often closer to the first
// all-reduce than the split. Such a group's bulk ends before its tail
// (Anchor::bulk_end). A small last bucket that the job all-reduces every
// step gives most groups a tail: each stays its collective's own.
std::vector<Anchor> as_anchors(const std::vector<Burst>& g, const std::vector<Burst>& fine) {
  std::vector<Anchor> out;
  out.reserve(g.size());
  size_t tails = 0;
  for (const Burst& b : g) {
    Anchor a{b.start, b.end};
    uint64_t tail = 0;
    size_t i = b.last;
    while (i > b.first && i < fine.size() &&
           static_cast<double>(tail + fine[i].bytes) < kTailShare * static_cast<double>(b.bytes))
      tail += fine[i--].bytes;
    if (i < b.last && i < fine.size() && fine[i].end < b.end) {
      a.bulk_end = fine[i].end;
      ++tails;
    }
    out.push_back(a);
  }
  if (2 * tails >= out.size())
    for (Anchor& a : out) a.bulk_end = 0;
  return out;
}

// The process's send/recv calls, sorted by start: from the main thread's
// first wait for a loader process on (all of them when it has none, or when
// `from_start` is false: a later window of a long session, which begins
// inside the training loop).
std::vector<const Span*> step_traffic(const TimelineStore& tl, const RankSteps& r, bool from_start) {
  const uint32_t pid = r.pid;
  uint64_t first_batch = 0;  // the first wait woken by a loader process
  if (from_start)
    for (const auto& g : r.main->segs)
      if (is_blocked(g.state) && g.waker_pid != pid && r.loaders.count(g.waker_tid)) {
        first_batch = g.start;
        break;
      }
  std::vector<const Span*> spans;
  for (const auto& [tid, t] : tl.threads()) {
    if (t.pid != pid) continue;
    for (const auto& s : t.spans)
      if (is_net(s) && s.start >= first_batch) spans.push_back(&s);
  }
  std::sort(spans.begin(), spans.end(), [](const Span* a, const Span* b) { return a->start < b->start; });
  return spans;
}

}  // namespace

// A CPU-only job (no accelerator, no marker) - for example PyTorch DDP over
// gloo: once per step the gradients are all-reduced over TCP by the process's
// communication threads, in a few bursts (buckets, ring phases waiting for
// the peer). Calls less than 2 ms apart, or with no work of the main thread
// between them, form a burst; the gaps between bursts fall into two
// populations, inside a step and between steps (see below for how the split
// is chosen). Setup traffic (rendezvous store, the parameter broadcast)
// happens before the first batch is requested, so traffic before the main
// thread first waits for a loader is left out (when it has loaders); step
// bursts far smaller than the typical one (store keep-alives, the final
// barrier) too.
std::vector<Anchor> collective_bursts(const TimelineStore& tl, RankSteps& r, const BurstModel* known) {
  const std::vector<const Span*> spans = step_traffic(tl, r, known == nullptr);
  if (spans.size() < 8) return {};
  const std::vector<Burst> fine = fine_bursts(spans, *r.main);
  if (known) {
    r.burst = *known;
    const auto groups = split_oversized(group_bursts(fine, known->split_ns), fine, known->step_bytes);
    return as_anchors(merge_split_steps(step_sized(groups, known->step_bytes), known->step_bytes), fine);
  }
  // Every step all-reduces the same gradients: the right split makes the
  // groups' byte counts (nearly) equal. Try each gap length as the split and
  // keep the one whose groups vary least in bytes (coefficient of
  // variation, once split steps are merged back; ties: more groups).
  std::vector<uint64_t> cands = {kFineSplitNs};
  for (size_t i = 1; i < fine.size(); ++i) cands.push_back(fine[i].start - fine[i - 1].end);
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  double best_cv = 1e18;
  uint64_t best_split = 0;
  std::vector<Burst> best;
  for (uint64_t split : cands) {
    auto g = group_bursts(fine, split);
    auto sized = step_sized(g, median_bytes(g));
    if (sized.size() < 3) break;  // larger splits only merge more
    auto keep = merge_split_steps(sized, median_bytes(sized));
    double mean = 0, var = 0;
    for (const Burst& b : keep) mean += static_cast<double>(b.bytes);
    mean /= static_cast<double>(keep.size());
    for (const Burst& b : keep) var += (static_cast<double>(b.bytes) - mean) * (static_cast<double>(b.bytes) - mean);
    double cv = mean > 0 ? std::sqrt(var / static_cast<double>(keep.size())) / mean : 1e18;
    if (cv < best_cv - 1e-3 || (cv < best_cv + 1e-3 && keep.size() > best.size())) {
      best_cv = cv;
      best_split = split;
      best = std::move(keep);
    }
  }
  if (best.empty()) return {};
  const uint64_t step_bytes = median_bytes(best);
  if (best.size() >= kLearnMinSteps && best_cv <= kLearnMaxCv) r.burst = {best_split, step_bytes};
  return as_anchors(best, fine);
}

}  // namespace steptrace::steps
