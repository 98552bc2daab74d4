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

// The same job recorded again (ddp_cpu_teardown.cap): after its last step,
// rank 1's gloo workers sleep through the teardown (0.9 s of the last 1 s
// window) in a block no wake ends. Counted as sleep that others end, it made
// them look like no workers in that window, and the last three steps lost
// their in-flight all-reduce: 2.6, 7.1 and 23.1 ms of collective against the
// job's 15.2, 19.1 and 39.2 ms, the rank's share 2.3 pp short. In windows of
// every length each rank's collective share stays within 1.5 pp of the
// job's own timers, and no step's is off by more than 10 pp.
TEST_CASE("steps: a DDP rank's comm workers asleep through the teardown still carry the last steps' all-reduce", "[steps][windows]") {
  std::ifstream in(std::string(FIXTURE_DIR) + "/ddp_cpu_teardown.truth.json");
  REQUIRE(in.good());
  const auto truth = nlohmann::json::parse(in);
  const std::string cap = std::string(FIXTURE_DIR) + "/ddp_cpu_teardown.cap";
  for (double w : {0.0, 0.5, 1.0, 2.0}) {
    INFO("window " << w << " s");
    auto r = replay_capture(cap, WindowPolicy::from(w, 0, 4096));
    REQUIRE(r.ok());
    REQUIRE(r->job.ranks.size() == 2);
    for (const auto& tr : truth["ranks"]) {
      const auto pid = tr["pid"].get<uint32_t>();
      INFO("rank " << tr["rank"].get<int>() << ", pid " << pid);
      const RankResult* rr = nullptr;
      for (const auto& x : r->job.ranks)
        if (x.pid == pid) rr = &x;
      REQUIRE(rr != nullptr);
      const auto& ts = tr["steps"];
      REQUIRE(rr->steps.size() == ts.size());
      double job = 0, traced = 0;
      for (size_t k = 1; k < ts.size(); ++k) {
        const double jd = static_cast<double>(ts[k]["end_ns"].get<int64_t>() - ts[k]["start_ns"].get<int64_t>());
        const double j = ts[k]["coll_ns"].get<double>() / jd;
        const double t = static_cast<double>(rr->steps[k].ns[static_cast<size_t>(Category::collective)]) /
                         static_cast<double>(rr->steps[k].duration());
        INFO("step " << k << ": collective " << 100 * j << " % by the job's timer, " << 100 * t << " % traced");
        CHECK(std::abs(t - j) < 0.10);
        job += j;
        traced += t;
      }
      const double n = static_cast<double>(ts.size() - 1);
      INFO("collective share: job " << 100 * job / n << " %, traced " << 100 * traced / n << " %");
      CHECK(std::abs(100 * (traced - job) / n) < 1.5);
    }
  }
}
