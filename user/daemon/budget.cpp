// SPDX-License-Identifier: Apache-2.0
#include "daemon/budget.h"

namespace steptrace::daemon {

int level_by_name(std::string_view name) {
  for (int i = 0; i <= kMaxLevel; ++i)
    if (kLevels[i].name == name) return i;
  return -1;
}

bool BudgetController::set_floor(int level) {
  floor_ = std::clamp(level, 0, kMaxLevel);
  if (level_ >= floor_) return false;
  level_ = floor_;
  samples_.clear();
  cheap_.clear();
  under_since_ = -1;
  return true;
}

double BudgetController::average_percent() const {
  double cpu = 0, wall = 0;
  for (const auto& s : samples_) {
    cpu += s.cpu;
    wall += s.wall;
  }
  return wall > 0 ? 100.0 * cpu / wall : 0;
}

BudgetController::Action BudgetController::sample(double now_s, double cpu_s, double wall_s, bool cheap) {
  if (wall_s <= 0) return Action::none;
  samples_.push_back({now_s, cpu_s, wall_s});
  while (!samples_.empty() && samples_.front().t < now_s - window_s_) samples_.pop_front();
  if (!cheap) cheap_.clear();
  else cheap_.push_back({now_s, cpu_s, wall_s});
  while (!cheap_.empty() && cheap_.front().t < now_s - kWindowS) cheap_.pop_front();
  double cheap_cpu = 0, cheap_wall = 0;
  for (const auto& s : cheap_) {
    cheap_cpu += s.cpu;
    cheap_wall += s.wall;
  }
  const bool cheap_over = window_s_ > kWindowS && cheap_wall >= kWindowS * 0.8 &&
                          100.0 * cheap_cpu / cheap_wall > max_percent_;
  // Judge only a full window measured at the current level (long windows:
  // all but a second of it, so a cycle's costly part is not over-weighted).
  double covered = 0;
  for (const auto& s : samples_) covered += s.wall;
  if (covered < std::max(window_s_ * 0.8, window_s_ - 1.5) && !cheap_over) return Action::none;
  double avg = cheap_over ? std::max(average_percent(), 100.0 * cheap_cpu / cheap_wall) : average_percent();
  if (avg > max_percent_) {
    under_since_ = -1;
    if (level_ < kMaxLevel) {
      ++level_;
      // A relapse soon after recovering: wait longer before the next try.
      if (now_s - last_recover_at_ < 2 * hold_s_) hold_s_ = std::min(hold_s_ * 2, 3600.0);
      changed_at_ = now_s;
      decided_at_percent_ = avg;
      samples_.clear();
      cheap_.clear();
      return Action::degrade;
    }
    return Action::none;
  }
  if (level_ > floor_ && avg < max_percent_ * kRecoverFraction) {
    if (under_since_ < 0) under_since_ = now_s;
    if (now_s - under_since_ >= hold_s_ && now_s - changed_at_ >= hold_s_) {
      --level_;
      changed_at_ = last_recover_at_ = now_s;
      decided_at_percent_ = avg;
      under_since_ = -1;
      samples_.clear();
      cheap_.clear();
      return Action::recover;
    }
  } else {
    under_since_ = -1;
  }
  return Action::none;
}

}  // namespace steptrace::daemon
