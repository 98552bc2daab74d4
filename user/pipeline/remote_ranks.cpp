// SPDX-License-Identifier: Apache-2.0
#include "pipeline/remote_ranks.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace {

namespace {

int env_int(const ProcIdentity* id, std::string_view key) {
  return id ? id->launcher_int({key}).value_or(-1) : -1;
}

}  // namespace

void note_remote_ranks(JobAnalysis& job, const ProcessNotes& notes) {
  int world = -1;
  std::vector<int> here;
  for (const auto& r : job.ranks) {
    const ProcIdentity* id = notes.identity(r.pid);
    world = std::max(world, env_int(id, "WORLD_SIZE"));
    if (int g = env_int(id, "RANK"); g >= 0) here.push_back(g);
  }
  if (world <= 0 || job.ranks.empty() || static_cast<size_t>(world) <= job.ranks.size()) return;
  std::sort(here.begin(), here.end());
  std::string named;
  for (int g : here) named += (named.empty() ? "" : ",") + std::to_string(g);
  Verdict& v = job.verdict;
  v.evidence.push_back(fmt::format("the launcher says WORLD_SIZE {}; this host traces {} of the ranks{}: the others "
                                   "run elsewhere",
                                   world, job.ranks.size(), named.empty() ? "" : " (RANK " + named + ")"));
  // A late rank here is named by the local verdict already; with none, the
  // ranks here are the ones waiting, and what they wait for is not here.
  if (v.category != Category::collective || v.straggler_rank >= 0) return;
  v.headline = "the ranks here wait on a rank on another host: " + v.headline;
  v.recommendation = "record every node of the job (steptrace record on each) and merge the captures: "
                     "`steptrace report A.cap B.cap ...` names the rank that holds the others back and its cause";
}

}  // namespace steptrace
