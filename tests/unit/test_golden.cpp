// SPDX-License-Identifier: Apache-2.0
// Recorded captures replayed without root: the whole analysis (timeline,
// steps, attribution, verdict) must reproduce the committed golden output.
// After an intended change to the analysis, regenerate the goldens with
// tools/update-golden.sh and review the diff.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "export/summary.h"
#include "session/session.h"

using namespace steptrace;

namespace {
nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}
}  // namespace

TEST_CASE("golden: the straggler capture replays to the committed analysis", "[golden]") {
  const std::string dir = FIXTURE_DIR;
  auto r = replay_capture(dir + "/straggler.cap");
  REQUIRE(r.ok());
  auto got = job_json(r->job);
  auto want = load_json(dir + "/straggler.golden.json");
  // Compare section by section so a failure says where the analysis moved.
  CHECK(got["verdict"] == want["verdict"]);
  CHECK(got["mean_share"] == want["mean_share"]);
  REQUIRE(got["ranks"].size() == want["ranks"].size());
  for (size_t i = 0; i < got["ranks"].size(); ++i) {
    INFO("rank " << i);
    CHECK(got["ranks"][i]["steps"].size() == want["ranks"][i]["steps"].size());
    CHECK(got["ranks"][i] == want["ranks"][i]);
  }
  CHECK(got == want);
}

TEST_CASE("golden: the straggler capture shows the straggler and a complete window", "[golden]") {
  auto r = replay_capture(std::string(FIXTURE_DIR) + "/straggler.cap");
  REQUIRE(r.ok());
  const auto& job = r->job;
  REQUIRE(job.ranks.size() == 2);
  CHECK(job.ranks[0].source == StepSource::runtime_probes);
  CHECK(job.ranks[0].steps.size() == job.ranks[1].steps.size());
  CHECK(job.verdict.straggler_rank == 1);
  CHECK(job.verdict.straggler_cause == Category::data_loading);
  CHECK_FALSE(r->incomplete());
  // The EFA control path from the capture's uverbs records: each rank set up
  // its endpoint before the first step and tore it down after the last.
  REQUIRE(job.fabric.ranks.size() == 2);
  for (const auto& f : job.fabric.ranks) {
    CHECK(f.setup.calls == 7);
    CHECK(f.in_steps.calls == 0);
    CHECK(f.teardown.calls == 5);
    CHECK(f.setup.bytes > 0);  // the collective buffer's dma-buf registration
  }
}

TEST_CASE("golden: an ABI v1 capture (switch records without the queue wait) still replays", "[golden]") {
  // tests/corpus/capture/ok-straggler.cap was recorded before ABI v2.
  const std::string path = std::string(CAPTURE_CORPUS_DIR) + "/ok-straggler.cap";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  char head[16] = {};
  in.read(head, sizeof(head));
  uint32_t abi = 0;
  std::memcpy(&abi, head + 12, sizeof(abi));
  REQUIRE(abi == 1);
  auto r = replay_capture(path);
  REQUIRE(r.ok());
  REQUIRE(r->job.ranks.size() == 2);
  CHECK(r->job.ranks[0].steps.size() >= 5);
  CHECK(r->job.verdict.straggler_rank == 1);
}
