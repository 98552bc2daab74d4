// SPDX-License-Identifier: Apache-2.0
// The step model behind the what-if (attribution/what_if.h). A synchronous
// data-parallel step ends when the last rank reaches the collective, plus
// the collective's own transfer: each rank's own path is its step's time
// outside the collective (what it does before arriving, and after the
// collective until its next step), and the step is the longest own path
// plus the transfer. A rank that arrives earlier waits the difference inside
// the collective, so shortening its path changes nothing until it becomes
// the last. Ranks that no collective couples (one rank, or steps that do
// not end together) each take their own path.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "attribution/job_analysis.h"

namespace steptrace {

// One step of the job: the same collective instance on every rank (steps
// paired by their common end, attribution/step_pairing.h), or one rank's
// step alone where nothing couples it.
struct PathStep {
  std::vector<const StepResult*> st;  // one per member
  std::vector<size_t> rank;           // index into JobAnalysis::ranks, per member
  bool coupled = false;               // a collective couples the members
  std::vector<double> own;            // per member: its own path, ns
  std::vector<double> coll;           // per member: its collective time (transfer + wait), ns
  double transfer = 0;                // coupled: the collective's transfer (the last rank's collective)

  size_t last() const;  // the member with the longest own path (the last to arrive)
  // The member steps' modelled durations, summed (each member's step lasts
  // the coupled step).
  double cost() const;
};

// Every counted step of the job (past the warm-up, kept in detail).
std::vector<PathStep> path_steps(const JobAnalysis& job);

// What a change does, summed over steps: the members' modelled time saved,
// and in how many of the steps it saved anything.
struct Saving {
  double ns = 0;       // summed over member steps
  size_t steps = 0;    // path steps where it saved more than 0.1 ms
};

using PathChange = std::function<void(PathStep&)>;

Saving saving_of(const std::vector<PathStep>& steps, const PathChange& change);

}  // namespace steptrace
