// SPDX-License-Identifier: Apache-2.0
// The EFA control path as setup events: every uverbs call of a rank's
// process (any thread), grouped by verb and by when it happened - before the
// first step (setup), inside a step, or after the last one (teardown).
// Registration and queue setup belong at start-up; inside steps they are a
// cost on the hot path (a memory-registration cache that misses).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "decode/rdma_verb.h"
#include "timeline/timeline_store.h"

namespace steptrace {

struct RankResult;

struct VerbStats {
  std::string name;
  VerbGroup group = VerbGroup::other;
  uint64_t calls = 0, errors = 0;
  uint64_t total_ns = 0, max_ns = 0;
  uint64_t bytes = 0;  // memory registered (registrations)
};

struct FabricPhase {
  std::vector<VerbStats> verbs;  // by name
  uint64_t calls = 0, errors = 0;
  uint64_t total_ns = 0, bytes = 0;
  uint64_t first_ns = 0, last_ns = 0;  // first entry, last return
  void add(const VerbInfo& v, const Span& s);
  void merge(const FabricPhase& o);
};

struct RankFabric {
  int rank = 0;  // -1: a process that is not a rank (every call counted as setup)
  uint32_t pid = 0;
  FabricPhase setup, in_steps, teardown;
  uint64_t counted_steps_with_calls = 0;  // steps past the warm-up that made uverbs calls
  uint64_t counted_steps = 0;
};

struct FabricSummary {
  std::vector<RankFabric> ranks;  // ranks that made uverbs calls, then other processes that did
  uint64_t calls() const;
};

// Fills each step's fabric_calls / fabric_ns and returns the per-rank summary.
// Which calls a (windowed) summary counts: a rank's from its range, other
// processes' from others_from_ns on; earlier ones were counted by an earlier window.
struct FabricWindow {
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> rank_range;  // pid -> [from, to); default all
  uint64_t others_from_ns = 0, others_to_ns = UINT64_MAX;
};

FabricSummary summarize_fabric(const TimelineStore& tl, std::vector<RankResult*>& ranks, int skip_warmup_steps,
                               const FabricWindow& w = {});
// Add another window's summary (by pid).
void merge_fabric(FabricSummary& into, const FabricSummary& more);

}  // namespace steptrace
