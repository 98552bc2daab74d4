// SPDX-License-Identifier: Apache-2.0
// Run a trainsim scenario under steptrace and compare the tracer's steps and
// breakdown with the simulator's ground truth. Used by the [root] accuracy
// tests and by the accuracy-matrix tool that writes docs/accuracy.md.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pipeline/analysis.h"
#include "truth.h"

namespace steptrace::accuracy {

struct ScenarioRun {
  std::string scenario;
  std::vector<std::string> extra_args;  // more trainsim flags
  std::string trainsim;                 // path to the trainsim binary
  double timeout_s = 120;
  // attach -p to the job instead of run: the job starts under a shell that
  // waits 4 s and execs it (same pid), so tracing - loading the programs
  // takes over a second on a cold CI machine - sees it from its first step;
  // tracing ends timeout_s after the start.
  bool attach = false;
  // attach -p to the job this many seconds after it started (0: not so), as
  // an SRE does: its loaders and ranks are running already. Only the steps
  // from the tracer's first counted one are compared.
  double attach_after_s = 0;
  uint32_t keep_steps = 0;   // --keep-steps (0: the default)
  double window_s = -1;      // --window (-1: the default)
  uint32_t sample_hz = 49;   // --sample-hz: on-CPU stack samples per CPU per second
  // The runtime's datastore (NDS) of the simulated devices is read, as on a
  // host whose driver has it (--dev-root at the simulator's device files).
  // Off: the kernel-only estimates an old driver leaves (arrival skew).
  bool datastore = true;
};

struct ScenarioResult {
  SessionReport report;
  trainsim::truth::Truth truth;
  trainsim::truth::Comparison cmp;
  std::string truth_gating;   // the window's gating category per the truth (largest share of the time)
  // The truth's share of each category in the compared steps' time (what
  // truth_gating is the largest of).
  std::map<std::string, double> truth_time_shares;
  std::string tracer_verdict; // steptrace's verdict category
  int truth_straggler = -1;   // straggler rank from the knobs (-1 none)
  int tracer_straggler_pid_rank = -1;  // truth rank of the pid steptrace named
};

// Throws nothing; returns an error message in *err on failure.
bool run_scenario(const ScenarioRun& run, ScenarioResult* out, std::string* err);

// The tracer's steps per rank, and (with a timeline) each main thread's
// runqueue waits, for the comparison's boundary rule.
trainsim::truth::TracerResult to_tracer_result(const JobAnalysis& job, const TimelineStore* timeline = nullptr);

}  // namespace steptrace::accuracy
