// SPDX-License-Identifier: Apache-2.0
// The steps stage: from the interval view of every traced thread, find the
// ranks (processes that drive the accelerator, mark steps, or - in a CPU-only
// job - move a periodic collective) and cut each rank's main thread into
// training steps. Attribution (attribution/job_analysis.h) consumes the
// result; this room knows nothing of categories or verdicts.
//
// Each rank's steps come from one source, best first:
//   runtime_probes  nrt_execute calls (uprobes on the Neuron runtime) are the anchors
//   marker          steptrace_step() calls open the steps
//   automatic       bursts of DMA queue kicks stand in for executions
//   automatic_host  no accelerator: the collective's traffic bursts, one per step
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"

namespace steptrace {

enum class StepSource { runtime_probes, marker, automatic, automatic_host, none };
const char* step_source_name(StepSource s);

namespace steps {

// One execution (or, in a CPU-only job, one collective burst).
struct Anchor {
  uint64_t start, end;
  // A CPU-only rank's collective: where the bulk of its bytes had moved,
  // before a small trailing burst the grouping took in (0: at `end`).
  uint64_t bulk_end = 0;
};

// How a CPU-only rank's collective traffic splits into steps: bursts are
// calls closer than split_ns (and not separated by work of the main thread),
// and one step moves step_bytes. Learned once a window holds enough steps
// that agree, then carried to the later windows of a long session
// (attribution/job_analysis.h, ResumePoint), which hold too few steps, or
// only the job's shutdown traffic, to learn it again.
struct BurstModel {
  uint64_t split_ns = 0;
  uint64_t step_bytes = 0;
  bool known() const { return step_bytes != 0; }
};

struct StepWindow {
  uint64_t start_ns = 0, end_ns = 0;
};

// One rank: who it is, which threads feed it, and where its steps are.
// Points into the TimelineStore it was built from.
struct RankSteps {
  int rank = 0;  // order of the rank processes by pid
  uint32_t pid = 0, main_tid = 0;
  std::string comm;
  StepSource source = StepSource::none;
  const ThreadTimeline* main = nullptr;
  std::set<uint32_t> loaders;  // tids that hand batches to the main thread
  std::vector<const ThreadTimeline*> loader_threads;
  std::vector<uint32_t> loader_pids;  // child processes (DataLoader workers)
  std::vector<uint32_t> loader_tids;  // every thread that can hand batches to main
  std::vector<Anchor> anchors;        // executions (empty for marker steps), in start order
  uint64_t max_anchor_ns = 0;         // the longest (a search by start knows how far back to look)
  // No accelerator (a CPU-only job): the anchors are the collective's
  // traffic bursts, one per step, not executions.
  bool host_only = false;
  std::set<uint32_t> comm_threads;  // threads of the rank that move the collective's bytes
  // host_only: the model the anchors were cut with (learned here or given);
  // unknown while the steps so far do not agree enough to learn it, and then
  // a long session keeps the rank's steps open rather than fold them.
  BurstModel burst;
  // host_only: when the collective was in flight - handed to a
  // communication worker until it finished (steps/collective_in_flight.h);
  // disjoint, in time order. Empty when the main thread moves the bytes.
  std::vector<std::pair<uint64_t, uint64_t>> in_flight;
  std::vector<StepWindow> steps;    // contiguous, in time order
};

// The whole stage: the ranks (sorted by pid, `rank` numbered from 0), each
// with its steps cut. `known` holds the burst models a long session learned
// in earlier windows, by pid.
std::vector<RankSteps> reconstruct_steps(const TimelineStore& tl, const ThreadTable& threads,
                                         const std::map<uint32_t, BurstModel>& known = {});

}  // namespace steps
}  // namespace steptrace
