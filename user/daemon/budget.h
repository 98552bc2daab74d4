// SPDX-License-Identifier: Apache-2.0
// The CPU budget: the tracer's own CPU (userspace rusage of every thread +
// BPF program run time, less the dump worker's thread CPU: captures are
// rate-limited instead, see dump_worker.h; windows.cpp sample_cpu) over a
// sliding window, against --max-cpu percent of one core. When
// the window average stays over budget the daemon steps one level down the
// degradation ladder (see kLevels); when it stays well under budget for a
// hold time it steps back up, and each relapse doubles that hold time.
#pragma once

#include <cstdint>
#include <algorithm>
#include <deque>
#include <string_view>

namespace steptrace::daemon {

struct DegradeLevel {
  std::string_view name;
  std::string_view what;
};

// The documented order (man page, README): each level includes the ones before.
inline constexpr DegradeLevel kLevels[] = {
    {"full", "every collector, configured drain interval"},
    {"slow_drain", "drain interval x10 (min 100 ms): fewer wakeups, bigger batches"},
    {"sampled",
     "per-event sched/net/block records only in 1 of every N analysis windows; steps counted in every window, "
     "categories and verdict from the detailed windows only"},
    {"aggregated",
     "no per-event sched/net/block records: per-process counters in the kernel (CPU, run-queue wait, switches, "
     "net and block bytes); steps still counted, categories and verdict are not"},
    {"no_net", "net collector detached (its byte counters stop)"},
    {"no_block", "block collector detached (its byte counters stop)"},
    {"no_sched", "sched collector detached (CPU and run-queue counters stop): steps still counted (accel ioctls, runtime probes)"},
    {"paused", "tracing detached; only discovery and metrics run until the hold time passes"},
};
inline constexpr int kMaxLevel = static_cast<int>(sizeof(kLevels) / sizeof(kLevels[0])) - 1;
// Levels the daemon tests against (indices into kLevels).
inline constexpr int kLevelSlowDrain = 1;
inline constexpr int kLevelSampled = 2;
inline constexpr int kLevelAggregated = 3;
inline constexpr int kLevelNoNet = 4;
inline constexpr int kLevelNoBlock = 5;
inline constexpr int kLevelNoSched = 6;
inline constexpr int kLevelPaused = 7;
static_assert(kLevelPaused == kMaxLevel, "kLevels and the level indices agree");

// Index of the level called `name`, -1 when there is none.
int level_by_name(std::string_view name);

// Which windows of level sampled carry per-event detail: the first window at
// the level and every `every`-th after it. The window that is open when the
// level changes still belongs to the old level: its close does not advance
// the cycle.
class DetailCycle {
 public:
  // The level is entered with a window of the old level still open.
  void level_changed() {
    phase_ = 0;
    pending_ = true;
  }
  // The daemon starts (or resumes) at a level with a fresh window.
  void restart() {
    phase_ = 0;
    pending_ = false;
  }
  void window_closed() {
    if (pending_) pending_ = false;
    else ++phase_;
  }
  bool detail(int level, uint32_t every) const {
    if (level < kLevelSampled) return true;
    if (level > kLevelSampled) return false;
    return every <= 1 || phase_ % every == 0;
  }

 private:
  uint64_t phase_ = 0;
  bool pending_ = false;
};

class BudgetController {
 public:
  enum class Action { none, degrade, recover };

  explicit BudgetController(double max_percent) : max_percent_(max_percent) {}
  void set_budget(double max_percent) { max_percent_ = max_percent; }
  // The cheapest mode allowed: the level never recovers past it, and a level
  // under it is raised at once. Returns true when that changed the level.
  bool set_floor(int level);
  int floor() const { return floor_; }
  // Length of the measuring window in seconds (kWindowS unless a level's cost
  // comes in cycles longer than that, as sampled's does). Takes effect with
  // the next sample.
  void set_window(double s) { window_s_ = s; }
  double window() const { return window_s_; }

  // One sample: `cpu_s` of tracer CPU spent over `wall_s` ending at `now_s`.
  // `cheap`: the whole sample ran in the cheap part of a long cycle (a
  // sampled-out window). The cycle costs at least that much, so kWindowS of
  // cheap samples over budget degrade at once instead of after the cycle.
  Action sample(double now_s, double cpu_s, double wall_s, bool cheap = false);

  int level() const { return level_; }
  double budget_percent() const { return max_percent_; }
  // Average over the current measuring window, percent of one core.
  double average_percent() const;
  double recover_hold_s() const { return hold_s_; }
  // The average that triggered the last level change.
  double last_decision_percent() const { return decided_at_percent_; }

  static constexpr double kWindowS = 5;
  static constexpr double kRecoverFraction = 0.3;

 private:
  struct Sample {
    double t, cpu, wall;
  };
  std::deque<Sample> samples_;
  std::deque<Sample> cheap_;  // the latest unbroken run of cheap samples
  double max_percent_;
  int level_ = 0;
  int floor_ = 0;
  double window_s_ = kWindowS;
  double changed_at_ = -1e18;
  double under_since_ = -1;
  double hold_s_ = 60;
  double last_recover_at_ = -1e18;
  double decided_at_percent_ = 0;
};

}  // namespace steptrace::daemon
