// SPDX-License-Identifier: Apache-2.0
// The CPU budget: the tracer's own CPU (userspace rusage + BPF program run
// time) over a sliding window, against --max-cpu percent of one core. When
// the window average stays over budget the daemon steps one level down the
// degradation ladder (see kLevels); when it stays well under budget for a
// hold time it steps back up, and each relapse doubles that hold time.
#pragma once

#include <cstdint>
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
    {"no_net", "net collector off (per-packet TCP events)"},
    {"no_block", "block collector off (per-request block I/O events)"},
    {"no_sched", "sched collector off: steps still counted (accel ioctls, runtime probes), categories are not"},
    {"paused", "tracing detached; only discovery and metrics run until the hold time passes"},
};
inline constexpr int kMaxLevel = static_cast<int>(sizeof(kLevels) / sizeof(kLevels[0])) - 1;

class BudgetController {
 public:
  enum class Action { none, degrade, recover };

  explicit BudgetController(double max_percent) : max_percent_(max_percent) {}
  void set_budget(double max_percent) { max_percent_ = max_percent; }

  // One sample: `cpu_s` of tracer CPU spent over `wall_s` ending at `now_s`.
  Action sample(double now_s, double cpu_s, double wall_s);

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
  double max_percent_;
  int level_ = 0;
  double changed_at_ = -1e18;
  double under_since_ = -1;
  double hold_s_ = 60;
  double last_recover_at_ = -1e18;
  double decided_at_percent_ = 0;
};

}  // namespace steptrace::daemon
