// SPDX-License-Identifier: Apache-2.0
// A recorded CPU-only PyTorch DDP job (tests/fixtures/ddp_cpu.cap, with the
// job's own step times in ddp_cpu.truth.json) replayed whole and in windows
// of every length: wherever a fold falls - in the set-up traffic before the
// first batch, mid-training, in the shutdown - each rank keeps exactly the
// job's steps. Before the burst model was carried across windows, folds every
// 0.25, 0.75 and 1.5 s of this very capture gave 22 (and 15), 25 and 23
// steps for 20.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "pipeline/replay.h"

using namespace steptrace;

namespace {

struct TruthStep {
  int64_t start, end;
};

std::map<uint32_t, std::vector<TruthStep>> load_truth() {
  std::ifstream in(std::string(FIXTURE_DIR) + "/ddp_cpu.truth.json");
  REQUIRE(in.good());
  auto j = nlohmann::json::parse(in);
  std::map<uint32_t, std::vector<TruthStep>> out;
  for (const auto& r : j["ranks"]) {
    auto& v = out[r["pid"].get<uint32_t>()];
    for (const auto& s : r["steps"]) v.push_back({s["start_ns"].get<int64_t>(), s["end_ns"].get<int64_t>()});
  }
  return out;
}

}  // namespace

TEST_CASE("steps: a recorded CPU-only DDP job keeps its 20 steps per rank wherever the windows fold", "[steps][windows]") {
  const auto truth = load_truth();
  REQUIRE(truth.size() == 2);
  const std::string cap = std::string(FIXTURE_DIR) + "/ddp_cpu.cap";
  for (double w : {0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0}) {
    INFO("window " << w << " s");
    auto r = replay_capture(cap, WindowPolicy::from(w, 0, 4096));
    REQUIRE(r.ok());
    if (w > 0 && w <= 1.0) CHECK(r->windows.folds >= 1);  // the folds happen: the test tests them
    REQUIRE(r->job.ranks.size() == 2);
    // Both ranks run the same loop: nobody is a straggler (before steps
    // were paired by the collective's exit and lateness had to show as the
    // other rank's wait, 8 of 26 such recordings named one).
    CHECK(r->job.verdict.straggler_rank == -1);
    for (const auto& rank : r->job.ranks) {
      INFO("pid " << rank.pid);
      auto it = truth.find(rank.pid);
      REQUIRE(it != truth.end());
      const auto& ts = it->second;
      CHECK(rank.source == StepSource::automatic_host);
      CHECK(rank.steps_total == ts.size());
      REQUIRE(rank.steps.size() == ts.size());
      // Step 0 opens at the first wait for a batch, before the job's own
      // clock starts it; the others within max(10 ms, 8 %) of the job's.
      size_t close = 0;
      for (size_t k = 1; k < ts.size(); ++k) {
        const int64_t off = static_cast<int64_t>(rank.steps[k].start_ns) - ts[k].start;
        const int64_t tol = std::max<int64_t>(10'000'000, (ts[k].end - ts[k].start) * 8 / 100);
        close += off > -tol && off < tol;
      }
      CHECK(close >= ts.size() - 2);
    }
  }
}
