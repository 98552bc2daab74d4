// SPDX-License-Identifier: Apache-2.0
// steptrace diff: per-rank, per-category B - A with a 95 % interval, and the
// --fail-if-slower gate, on reports built here.
#include <catch2/catch.hpp>

#include <random>

#include "cli/options.h"
#include "export/report_diff.h"

using namespace steptrace;
using nlohmann::json;

namespace {

// A report's job object: `ranks` ranks of `steps` steps each, device time
// `device_ms` and host time `host_ms` per step with +-0.5 ms of noise.
json job_of(int ranks, int steps, double device_ms, double host_ms, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(-0.5, 0.5);
  json rs = json::array();
  for (int r = 0; r < ranks; ++r) {
    json st = json::array();
    for (int k = 0; k < steps; ++k) {
      const auto dev = static_cast<uint64_t>((device_ms + noise(rng)) * 1e6);
      const auto host = static_cast<uint64_t>((host_ms + noise(rng)) * 1e6);
      st.push_back({{"index", k},
                    {"duration_ns", dev + host},
                    {"categories", {{"device_execute", dev}, {"host_overhead", host}, {"collective", 0}}}});
    }
    rs.push_back({{"rank", r}, {"steps", st}});
  }
  return {{"skipped_warmup_steps", 1}, {"ranks", rs}, {"verdict", {{"headline", "compute-bound"}}}};
}

}  // namespace

TEST_CASE("diff: a run against itself changes nothing", "[diff][unit]") {
  const json a = job_of(2, 40, 20, 5, 1);
  const ReportDiff d = diff_reports(a, a, "a", "a");
  CHECK(d.all.a_steps == 78);  // the warm-up step of each rank is left out
  CHECK(d.all.step.delta_ms == 0);
  CHECK_FALSE(d.all.step.significant);
  for (const auto& c : d.all.categories) CHECK_FALSE(c.significant);
  CHECK_FALSE(slower_than(d, 0));
  CHECK(format_diff_text(d).find("no significant change") != std::string::npos);
  REQUIRE(d.ranks.size() == 2);
}

TEST_CASE("diff: another run of the same job is within noise, a 10 % slower device is named", "[diff][unit]") {
  const json a = job_of(2, 40, 20, 5, 1);
  const ReportDiff same = diff_reports(a, job_of(2, 40, 20, 5, 2), "a", "b");
  CHECK_FALSE(same.all.step.significant);  // +-0.5 ms of noise around the same means
  CHECK_FALSE(slower_than(same, 5));

  const ReportDiff slow = diff_reports(a, job_of(2, 40, 22.5, 5, 3), "a", "slow");
  CHECK(slow.all.step.significant);
  CHECK(slow.step_change_pct == Approx(10).margin(1.0));
  CHECK(slow.step_change_ci_pct > 0);
  CHECK(slow.step_change_ci_pct < 2);
  CHECK(slower_than(slow, 5));
  CHECK_FALSE(slower_than(slow, 15));
  bool device = false, host = false;
  for (const auto& c : slow.all.categories) {
    if (c.what == "device_execute") device = c.significant && c.delta_ms == Approx(2.5).margin(0.3);
    if (c.what == "host_overhead") host = c.significant;
  }
  CHECK(device);
  CHECK_FALSE(host);
  const std::string text = format_diff_text(slow);
  INFO(text);
  CHECK(text.find("SLOWER") != std::string::npos);
  CHECK(text.find("device_execute +2.") != std::string::npos);
  CHECK(text.find("(rank 0 +2.") != std::string::npos);
  const json j = diff_json(slow);
  CHECK(j["all_ranks"]["categories"]["device_execute"]["significant"] == true);
  CHECK(j["ranks"].size() == 2);

  // A faster B is no regression.
  const ReportDiff fast = diff_reports(job_of(2, 40, 22.5, 5, 3), a, "slow", "a");
  CHECK(fast.all.step.significant);
  CHECK_FALSE(slower_than(fast, 5));
}

TEST_CASE("diff: ranks in one run only and empty runs are said, not guessed", "[diff][unit]") {
  const ReportDiff d = diff_reports(job_of(2, 10, 20, 5, 1), job_of(3, 10, 20, 5, 1), "two", "three");
  CHECK(d.ranks.size() == 2);
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0] == "rank 2 is in three only");
  const ReportDiff e = diff_reports(job_of(2, 10, 20, 5, 1), json::object(), "a", "empty");
  CHECK_FALSE(slower_than(e, 0));
  CHECK(std::find(e.notes.begin(), e.notes.end(), "no counted steps in empty: nothing to compare") != e.notes.end());
}

TEST_CASE("diff: the command takes two runs and a threshold", "[diff][options]") {
  int code = -1;
  const char* ok[] = {"steptrace", "diff", "a.cap", "b.json", "--fail-if-slower", "5"};
  auto o = parse_options(6, ok, &code);
  REQUIRE(o.ok());
  CHECK(o->command == CommandKind::diff);
  CHECK(o->diff_paths == std::vector<std::string>{"a.cap", "b.json"});
  CHECK(o->fail_if_slower_pct == 5);
  const char* one[] = {"steptrace", "diff", "a.cap"};
  CHECK_FALSE(parse_options(3, one, &code).ok());
  CHECK(code == 2);
  const char* neg[] = {"steptrace", "diff", "a", "b", "--fail-if-slower", "-1"};
  CHECK_FALSE(parse_options(6, neg, &code).ok());
}
