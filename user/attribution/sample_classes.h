// SPDX-License-Identifier: Apache-2.0
// Each on-CPU stack sample joined with the step and category its thread was
// in at that instant: a rank's main thread by the paint that wins at the
// sample (host overhead, a copy's ioctl, a busy-polled execution, a
// collective); a loader thread or worker process as data loading
// (preprocessing: it was on a CPU); a target thread that had preempted a
// rank's main thread as CPU contention; anything else as other.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "attribution/categories.h"
#include "attribution/interval_painter.h"
#include "profile/cpu_samples.h"
#include "steps/rank_steps.h"

namespace steptrace {

// Whose time the sample was.
enum class SampleRole : uint8_t { main = 0, loader, preemptor, helper, outside, count_ };
const char* sample_role_name(SampleRole r);

struct ProfiledSample {
  uint64_t ts = 0;
  uint32_t stack = 0;  // SampleStore::stacks() index
  Category category = Category::other;
  SampleRole role = SampleRole::outside;
  int32_t rank = -1;   // the rank whose step it fell in (-1: none)
};

// (category, role, stack) -> samples.
using ProfileKey = std::tuple<uint8_t, uint8_t, uint32_t>;

struct CpuProfile {
  std::vector<ProfiledSample> samples;        // this window's, classified
  std::map<ProfileKey, uint64_t> folded;      // windows folded earlier, counted
  std::map<ProfileKey, uint64_t> counts() const;  // both together
  uint64_t total() const;
};

// The category of the highest-priority paint covering ts (ties: the earliest
// start, as the painter decides); `fallback` when none does.
Category category_at(const std::vector<Paint>& paints, uint64_t ts, Category fallback = Category::other);

// Classifies every sample of `store` (sorted by time). `main_paints` gives,
// per rank (index into ranks) and step (index into its windows), the paints
// attribute_step drew; the steps are given as windows.
struct RankPaints {
  const steps::RankSteps* rank = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> steps;  // [start, end) per step
  std::vector<std::vector<Paint>> paints;           // per step (empty where no sample of the main thread falls)
};
std::vector<ProfiledSample> classify_samples(const SampleStore& store, const std::vector<RankPaints>& ranks);
// Whether `store` (sorted by time) has a sample of thread `tid` in [from, to):
// the steps whose paints classify_samples reads (the others' may be left empty).
bool has_sample_of(const SampleStore& store, uint32_t tid, uint64_t from, uint64_t to);

}  // namespace steptrace
