// SPDX-License-Identifier: Apache-2.0
// Answers an SRE acts on, on real trainsim jobs with the change planted and
// its truth recorded: a hang names the rank that did not join the collective
// and the syscall it is in; a mid-run slowdown of one rank's loaders is
// found where it began, with the category and rank that moved.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "support/shell.h"
#include "support/workload.h"

namespace fs = std::filesystem;
using nlohmann::json;
using steptrace::test::sh;
using steptrace::test::slurp;

#ifdef TRAINSIM_BIN
namespace {

struct SimRun {
  fs::path dir;
  json report, truth;
  std::string out;
  int rc = -1;
};

// steptrace run -- trainsim (compute-bound, 2 ranks) with extra trainsim arguments.
SimRun traced_sim(const std::string& sim_args, const std::string& steptrace_args = "") {
  SimRun r;
  char tmpl[] = "/tmp/steptrace-regress.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  r.dir = tmpl;
  const std::string d = r.dir.string();
  fs::create_directories(r.dir / "dev");
  auto res = sh(std::string(STEPTRACE_BIN) + " run " + steptrace_args + " --json " + d + "/r.json --accel-dev " + d +
                "/dev/neuron0 --accel-dev " + d + "/dev/neuron1 --rdma-dev " + d + "/dev/uverbs0 -- " + TRAINSIM_BIN +
                " --scenario compute-bound --ranks 2 --dev-dir " + d + "/dev --truth " + d + "/truth.json " + sim_args +
                " 2>&1");
  r.rc = res.rc;
  r.out = res.out;
  if (fs::exists(r.dir / "r.json")) r.report = json::parse(slurp(d + "/r.json"));
  if (fs::exists(r.dir / "truth.json")) r.truth = json::parse(slurp(d + "/truth.json"));
  return r;
}

// The tracer's rank number of trainsim's rank `sim_rank` (the tracer numbers by pid).
int tracer_rank(const SimRun& r, int sim_rank) {
  int pid = -1;
  for (const auto& t : r.truth["ranks"])
    if (t["rank"] == sim_rank) pid = t["pid"];
  for (const auto& t : r.report["job"]["ranks"])
    if (t["pid"] == pid) return t["rank"];
  return -1;
}

}  // namespace

TEST_CASE("hangs: a rank stuck mid-step is named as the one missing from the collective, with its syscall, within 3 s "
          "of the threshold",
          "[root][hangs]") {
  steptrace::test::require_root();
  for (const std::string kind : {"sleep", "dread"}) {
    INFO("hang kind " << kind);
    auto r = traced_sim("--steps 24 --hang-rank 1 --hang-at-step 10 --hang-s 6 --hang-kind " + kind, "--hang-after 2");
    INFO(r.out);
    REQUIRE(r.rc == 0);
    REQUIRE(r.truth.contains("hang"));
    const auto& truth = r.truth["hang"];
    const auto& hangs = r.report["hangs"];
    REQUIRE(hangs.size() == 1);
    const auto& h = hangs[0];
    const int missing = tracer_rank(r, 1);
    CHECK(h["missing_ranks"] == json::array({missing}));
    const double threshold = h["threshold_s"];
    CHECK(threshold == Approx(2.0));  // 10 x p99 of ~50 ms steps is under the floor
    // Found after the hang began and at most 3 s after its threshold was reached.
    const double after_start = (h["detected_ns"].get<double>() - truth["start_ns"].get<double>()) / 1e9;
    CHECK(after_start > 0);
    CHECK(after_start <= threshold + 3.0);
    // Closed once the steps went on: after the hang ended, and before the job did.
    CHECK(h["ended_ns"].get<uint64_t>() >= truth["end_ns"].get<uint64_t>());
    CHECK((h["ended_ns"].get<double>() - truth["end_ns"].get<double>()) / 1e9 < 2.0);
    for (const auto& rk : h["ranks"]) {
      if (rk["rank"] == missing) {
        CHECK(rk["in_collective"] == false);
        CHECK(rk["tid"] == truth["tid"]);
        if (kind == "sleep") {
          CHECK(rk["syscall_name"] == "clock_nanosleep");
          CHECK(rk["state"] == "S");
        } else {
          CHECK(rk["syscall_name"] == "read");
          CHECK(rk["state"] == "D");
          CHECK(rk["fd_target"].get<std::string>().find("neuron") != std::string::npos);
        }
      } else {
        CHECK(rk["in_collective"] == true);  // it waits in its device execution
      }
    }
    CHECK(r.out.find("HANG: no step ended") != std::string::npos);
    fs::remove_all(r.dir);
  }
}

TEST_CASE("changes: one rank's loaders slowed mid-run are found within 20 steps, as data loading on that rank",
          "[root][changes]") {
  steptrace::test::require_root();
  auto r = traced_sim("--steps 70 --change-at-step 30 --change preprocess-ms=200 --change-rank 1");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto& changes = r.report["job"]["changes"];
  INFO(changes.dump(1));
  // The planted change is the largest one (a loaded machine may add smaller, real ones of its own).
  REQUIRE(!changes.empty());
  json c = changes[0];
  for (const auto& x : changes)
    if (std::abs(x["change_pct"].get<double>()) > std::abs(c["change_pct"].get<double>())) c = x;
  CHECK(std::abs(c["step"].get<int>() - 30) <= 20);
  CHECK(c["change_pct"].get<double>() > 10);
  CHECK(c["cause"] == "data_loading");
  CHECK(c["cause_rank"] == tracer_rank(r, 1));
  CHECK(r.out.find("Changes in step time") != std::string::npos);
  fs::remove_all(r.dir);
}
#endif
