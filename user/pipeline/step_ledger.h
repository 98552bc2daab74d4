// SPDX-License-Identifier: Apache-2.0
// What a long session keeps of the steps it has analysed. Every window
// (pipeline/analysis.h, Analysis::fold) the steps that are over fold in here:
// per-rank totals and counts over all of them, the most recent ones in detail
// (bounded: keep_steps per rank), and the point each rank's next window
// resumes from. The timeline before that point can then be forgotten, so a
// session holds one window of timeline however long it runs, and each
// step is analysed a bounded number of times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "attribution/job_analysis.h"

namespace steptrace {

class StepLedger {
 public:
  explicit StepLedger(size_t keep_steps = 4096) : keep_steps_(keep_steps) {}

  // The options for the next window's analysis: each folded rank resumes at its cut;
  // the proxies named so far are measured in it too.
  AnalysisOptions resume(AnalysisOptions base) const;

  // Fold the steps of a window's analysis that are over at `now` (all but
  // the last two of each rank still stepping; all of a rank that stopped).
  // Returns the time before which the timeline may be forgotten (0: nothing
  // folded, keep everything).
  uint64_t fold(const JobAnalysis& ja, const TimelineStore& tl, uint64_t now);

  // The session's analysis: the folded steps and totals, then the last
  // window's (analysed with resume()), ranks renumbered by pid, shares over
  // every counted step. The verdict is left to judge().
  JobAnalysis merge(JobAnalysis tail) const;

  bool empty() const { return ranks_.empty(); }
  uint64_t folds() const { return folds_; }
  uint64_t steps_out_of_detail() const { return out_of_detail_; }
  size_t memory_bytes() const;

 private:
  struct RankLedger {
    RankResult res;                // totals and counts over the folded steps
    std::deque<StepResult> recent; // the last keep_steps_ folded steps
    ResumePoint next;
  };
  std::map<uint32_t, RankLedger> ranks_;  // by pid
  FabricSummary fabric_;                   // EFA control path of the folded part
  std::vector<signals::ProxyThread> proxies_;  // network proxies named by folded windows
  StepDistribution out_of_detail_dist_;    // counted steps that left `recent`
  uint64_t others_from_ns_ = 0;
  size_t keep_steps_;
  uint64_t folds_ = 0, out_of_detail_ = 0;
};

}  // namespace steptrace
