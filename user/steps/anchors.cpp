// SPDX-License-Identifier: Apache-2.0
#include "steps/anchors.h"

#include <algorithm>
#include <cmath>

#include "steps/span_classes.h"
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

// Calls (sorted by start) grouped into bursts: a call more than `split` after
// the burst's end starts the next one. `bytes` gets each burst's bytes.
std::vector<Anchor> group_calls(const std::vector<const Span*>& spans, uint64_t split, std::vector<uint64_t>* bytes) {
  std::vector<Anchor> out;
  Anchor cur{spans.front()->start, spans.front()->end};
  uint64_t cur_bytes = 0;
  for (const Span* sp : spans) {
    if (sp->start > cur.end + split) {
      out.push_back(cur);
      bytes->push_back(cur_bytes);
      cur = {sp->start, sp->end};
      cur_bytes = 0;
    }
    cur.end = std::max(cur.end, sp->end);
    cur_bytes += sp->bytes;
  }
  out.push_back(cur);
  bytes->push_back(cur_bytes);
  return out;
}

// The bursts that are step-sized: not far smaller than the typical one
// (store keep-alives, the final barrier).
std::vector<size_t> step_sized(const std::vector<uint64_t>& bytes) {
  uint64_t typical = median_ns(bytes);
  std::vector<size_t> keep;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] * 4 >= typical) keep.push_back(i);
  return keep;
}

// The process's send/recv calls from the main thread's first wait for a
// loader process on (all of them when it has none), sorted by start.
std::vector<const Span*> step_traffic(const TimelineStore& tl, const RankSteps& r) {
  const uint32_t pid = r.pid;
  uint64_t first_batch = 0;  // the first wait woken by a loader process
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
// the peer). Calls less than 2 ms apart form a burst; the gaps between
// bursts fall into two populations, inside a step and between steps (see
// below for how the split is chosen). Setup traffic (rendezvous store, the parameter
// broadcast) happens before the first batch is requested, so traffic before
// the main thread first waits for a loader is left out (when it has
// loaders); step bursts far smaller than the typical one (store
// keep-alives, the final barrier) too.
std::vector<Anchor> collective_bursts(const TimelineStore& tl, const RankSteps& r) {
  const std::vector<const Span*> spans = step_traffic(tl, r);
  if (spans.size() < 8) return {};
  // Every step all-reduces the same gradients: the right split makes the
  // groups' byte counts (nearly) equal. Try each gap length as the split and
  // keep the one whose groups vary least in bytes (coefficient of
  // variation; ties: more groups). Under load a peer's delay can stretch a
  // gap inside a step past the gaps between steps; such a split step shows
  // as two neighbouring groups whose bytes add up to one step: merged.
  std::vector<uint64_t> fine_bytes;
  auto fine = group_calls(spans, 2'000'000, &fine_bytes);
  std::vector<uint64_t> cands = {2'000'000};
  for (size_t i = 1; i < fine.size(); ++i) cands.push_back(fine[i].start - fine[i - 1].end);
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  double best_cv = 1e18;
  size_t best_n = 0;
  std::vector<Anchor> bursts;
  std::vector<uint64_t> bytes;
  for (uint64_t split : cands) {
    std::vector<uint64_t> b;
    auto g = group_calls(spans, split, &b);
    auto keep = step_sized(b);
    if (keep.size() < 3) break;  // larger splits only merge more
    double mean = 0, var = 0;
    for (size_t i : keep) mean += static_cast<double>(b[i]);
    mean /= static_cast<double>(keep.size());
    for (size_t i : keep) var += (static_cast<double>(b[i]) - mean) * (static_cast<double>(b[i]) - mean);
    double cv = mean > 0 ? std::sqrt(var / static_cast<double>(keep.size())) / mean : 1e18;
    if (cv < best_cv - 1e-3 || (cv < best_cv + 1e-3 && keep.size() > best_n)) {
      best_cv = cv;
      best_n = keep.size();
      bursts = std::move(g);
      bytes = std::move(b);
    }
  }
  if (bursts.empty()) return {};
  std::vector<Anchor> out;
  std::vector<uint64_t> out_bytes;
  for (size_t i : step_sized(bytes)) {
    out.push_back(bursts[i]);
    out_bytes.push_back(bytes[i]);
  }
  const double per_step = static_cast<double>(median_ns(out_bytes));
  std::vector<Anchor> merged;
  for (size_t i = 0; i < out.size(); ++i) {
    Anchor a = out[i];
    double sum = static_cast<double>(out_bytes[i]);
    while (sum < 0.9 * per_step && i + 1 < out.size() &&
           sum + static_cast<double>(out_bytes[i + 1]) <= 1.1 * per_step) {
      sum += static_cast<double>(out_bytes[++i]);
      a.end = out[i].end;
    }
    merged.push_back(a);
  }
  return merged;
}

}  // namespace steptrace::steps
