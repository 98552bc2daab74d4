// SPDX-License-Identifier: Apache-2.0
// One job across hosts (multinode/): the hosts' clocks put on one time line,
// steps paired across captures, and the rank that holds the others back
// named with its cause - on reports built here, whose truth is known.
#include <catch2/catch.hpp>

#include "multinode/job_cut.h"
#include "multinode/job_html.h"
#include "multinode/job_merge.h"
#include "multinode/job_view.h"
#include "pipeline/remote_ranks.h"

using namespace steptrace;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr size_t kColl = static_cast<size_t>(Category::collective);
constexpr size_t kData = static_cast<size_t>(Category::data_loading);
constexpr size_t kDev = static_cast<size_t>(Category::device_execute);

struct PlannedRank {
  int global_rank;
  int node;
  uint64_t late_ns;  // its own extra data loading before the collective, every step
};

// A host whose monotonic clock reads `mono_at_wall0` when the wall clock
// reads `wall0`, with ranks stepping every 50 ms of wall time: each step is
// 30 ms of device work, `late` of data loading, then the collective, which
// ends for every rank on every host at the same wall time (the slowest
// rank's arrival plus 2 ms).
SessionReport make_host(const std::string& boot, uint64_t mono_at_wall0, int64_t wall0, double drift_ppm,
                        const std::vector<PlannedRank>& ranks, uint64_t max_late, int steps, uint32_t pid0) {
  SessionReport r;
  r.source.host = "host-" + boot;
  r.source.boot_id = boot;
  // Anchors every 10 s: wall = wall0 + (mono - mono_at_wall0) * (1 + drift).
  auto wall_at = [&](uint64_t mono) {
    const double d = static_cast<double>(mono - mono_at_wall0);
    return wall0 + static_cast<int64_t>(d + d * drift_ppm * 1e-6);
  };
  for (uint64_t m = mono_at_wall0; m <= mono_at_wall0 + 20'000 * kMs; m += 10'000 * kMs)
    r.analysis.clock.add(ClockAnchor{m, wall_at(m), 40});
  const uint64_t step = 50 * kMs;
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankResult rr;
    rr.rank = static_cast<int>(i);
    rr.pid = pid0 + static_cast<uint32_t>(i);
    for (int k = 0; k < steps; ++k) {
      StepResult st;
      st.index = k;
      // The host's monotonic time of wall time wall0 + k*step (drift is tiny over a second).
      st.start_ns = mono_at_wall0 + static_cast<uint64_t>(k) * step;
      st.end_ns = st.start_ns + step;
      st.ns[kDev] = 30 * kMs;
      st.ns[kData] = 16 * kMs - max_late + ranks[i].late_ns;
      st.ns[kColl] = step - st.ns[kDev] - st.ns[kData];
      st.data_preprocess_ns = st.ns[kData];
      st.host_collective = true;
      st.arrival_ns = st.end_ns - st.ns[kColl];
      rr.steps.push_back(st);
    }
    r.job.ranks.push_back(rr);
    ProcIdentity id;
    id.job = "job-42";
    id.env = {{"RANK", std::to_string(ranks[i].global_rank)},
              {"GROUP_RANK", std::to_string(ranks[i].node)},
              {"LOCAL_RANK", std::to_string(i)},
              {"WORLD_SIZE", "4"}};
    r.analysis.notes.identities[rr.pid] = id;
  }
  r.job.verdict.category = Category::collective;
  r.job.verdict.headline = "collectives gate the accelerator";
  return r;
}

}  // namespace

TEST_CASE("job merge: the rank that arrives last on another host is named, with its cause and the others' wait",
          "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  // Node 1 booted 2.5 s after node 0: the same wall time reads 2.5 s less
  // on its monotonic clock.
  const auto a = make_host("boot-a", 1000'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 14 * kMs, 40, 100);
  const auto b = make_host("boot-b", 997'500 * kMs, wall0, 0, {{2, 1, 0}, {3, 1, 14 * kMs}}, 14 * kMs, 40, 100);
  const JobReport job = merge_job({{"b.cap", &b}, {"a.cap", &a}});
  REQUIRE(job.ranks.size() == 4);
  CHECK(job.ranks[0].global_rank == 0);
  CHECK(job.ranks[3].global_rank == 3);
  CHECK(job.ranks[3].node == 1);
  CHECK(job.job_id == "job-42");
  CHECK(job.world_size == 4);
  CHECK(job.wall_clock_hosts == 2);
  CHECK(job.job_steps == 39);  // every step past the warm-up, paired across both hosts
  REQUIRE(job.culprit.found);
  const JobRank& c = job.ranks[job.culprit.rank];
  CHECK(c.global_rank == 3);
  CHECK(c.node == 1);
  CHECK(job.culprit.cause == Category::data_loading);
  CHECK(job.culprit.cause_detail == "the loaders' CPU preprocessing");
  CHECK(job.culprit.last_steps == 39);
  CHECK(job.culprit.mean_late_ns == 14 * kMs);
  CHECK(job.culprit.victim_wait_ns == 18 * kMs);  // 50 - 30 - 2 ms of their own data loading
  CHECK(job.culprit.victims.size() == 3);
  CHECK(job.headline.find("rank 3 on node 1") != std::string::npos);
  REQUIRE(job.nodes.size() == 2);
  CHECK(job.nodes[1].last_steps == 39);
  CHECK(job.nodes[0].last_steps == 0);
  const auto text = format_job_text(job);
  CHECK(text.find("ranks 0-2 on node(s) 0-1 wait 18.0 ms/step in the collective for rank 3 on node 1") !=
        std::string::npos);
  const auto j = job_report_json(job);
  CHECK(j["culprit"]["rank"] == 3);
  CHECK(j["culprit"]["cause"] == "data_loading");
  CHECK(j["hosts"][0]["clock"]["method"] == "wall_clock_anchors");
}

TEST_CASE("job merge: a rank late only because its step started late (the ring's last hop) is no culprit",
          "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  // Every rank: 30 ms on the device, 6 ms of data loading, then the
  // collective, which ends at the same time for all. Rank 2's steps start
  // 10 ms late (its previous collective ended last: it took the ring's last
  // hop over a saturated link) and it arrives 10 ms late after the same
  // 36 ms of work; the others wait 10 ms longer in the collective than it.
  const auto a = make_host("boot-a", 1000'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 10 * kMs, 40, 100);
  auto b = make_host("boot-b", 997'500 * kMs, wall0, 0, {{2, 1, 0}, {3, 1, 0}}, 10 * kMs, 40, 100);
  for (auto& st : b.job.ranks[0].steps) {
    st.start_ns += 10 * kMs;
    st.ns[kColl] -= 10 * kMs;
    st.arrival_ns += 10 * kMs;
  }
  const JobReport inherited = merge_job({{"a.cap", &a}, {"b.cap", &b}});
  INFO(inherited.headline);
  CHECK(inherited.job_steps >= 30);
  CHECK_FALSE(inherited.culprit.found);
  CHECK(inherited.ranks[2].last_steps == 0);
  // The same lateness from 10 ms more of its own data loading (its steps
  // start on time): it holds the others back.
  auto c = make_host("boot-b", 997'500 * kMs, wall0, 0, {{2, 1, 10 * kMs}, {3, 1, 0}}, 10 * kMs, 40, 100);
  const JobReport own = merge_job({{"a.cap", &a}, {"b.cap", &c}});
  REQUIRE(own.culprit.found);
  CHECK(own.ranks[own.culprit.rank].global_rank == 2);
  CHECK(own.culprit.cause == Category::data_loading);
}

TEST_CASE("job merge: hosts are paired by their wall clocks, not by raw monotonic times", "[multinode]") {
  // Node 1's monotonic clock is 25 ms (half a step) off node 0's for the
  // same wall time, and its wall clock runs 40 ppm fast against it: the
  // mapping recovers both, and the steps pair as they happened.
  const int64_t wall0 = 1'800'000'000'000'000'000;
  const auto a = make_host("boot-a", 500'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 9 * kMs}}, 9 * kMs, 30, 10);
  const auto b = make_host("boot-b", 500'025 * kMs, wall0, 40, {{2, 1, 0}, {3, 1, 0}}, 9 * kMs, 30, 10);
  const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
  CHECK(job.hosts[1].clock.drift_ppm == Approx(40).margin(0.5));
  CHECK(job.hosts[1].clock.offset_ns == wall0 - static_cast<int64_t>(500'025 * kMs));
  REQUIRE(job.culprit.found);
  CHECK(job.ranks[job.culprit.rank].global_rank == 1);
  CHECK(job.ranks[job.culprit.rank].node == 0);
  CHECK(job.culprit.mean_late_ns == 9 * kMs);
}

TEST_CASE("job merge: by the wall clocks alone the bound adds the errors their kernels state, or says it has none",
          "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  auto a = make_host("boot-a", 500'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 9 * kMs}}, 9 * kMs, 30, 10);
  auto b = make_host("boot-b", 700'000 * kMs, wall0, 0, {{2, 1, 0}, {3, 1, 0}}, 9 * kMs, 30, 10);
  {
    // Anchors from before adjtimex was read: the wall clocks' error is not stated.
    const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
    CHECK(job.wall_clock_bound_ns == -1);
    CHECK(job.reading_bound_ns == 80);
    CHECK(job.alignment_bound_ns == 80);
    CHECK_FALSE(job.network_aligned);
    CHECK(format_job_text(job).find("not stated by the captures") != std::string::npos);
    // No stream marks kept: why the network did not refine it.
    CHECK(job.hosts[1].network_why_not.find("no TCP stream positions") != std::string::npos);
  }
  auto restate = [](SessionReport& r, int64_t max_error_us, bool unsynced) {
    ClockAnchors again;
    ClockAnchor x = r.analysis.clock.first(), y = r.analysis.clock.last();
    for (ClockAnchor* k : {&x, &y}) {
      k->wall_max_error_us = max_error_us;
      k->wall_unsynced = unsynced;
      again.add(*k);
    }
    r.analysis.clock = again;
  };
  restate(a, 1500, false);
  restate(b, 2500, false);
  {
    const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
    CHECK(job.wall_clock_bound_ns == 80 + 4'000'000);
    CHECK(format_job_text(job).find("within +-4.000 ms in all") != std::string::npos);
    CHECK(job_report_json(job)["alignment"]["wall_clock_bound_ns"] == 80 + 4'000'000);
  }
  restate(b, 2500, true);
  {
    const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
    CHECK(job.wall_clock_bound_ns == -1);
    CHECK(job.unsynced_hosts == std::vector<size_t>{1});
    CHECK(format_job_text(job).find("NOT BOUNDED: the wall clock of host(s) 1 was not synchronized") !=
          std::string::npos);
    CHECK(job_report_json(job)["alignment"]["wall_clock_bound_ns"].is_null());
  }
}

TEST_CASE("job merge: captures of one boot share a clock, and ranks that arrive together have no culprit",
          "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  const auto a = make_host("boot-a", 700'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 0, 20, 10);
  const auto b = make_host("boot-a", 700'000 * kMs, wall0, 0, {{2, 1, 0}, {3, 1, 0}}, 0, 20, 20);
  const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
  CHECK(job.hosts[1].clock.method == AlignmentMethod::same_boot);
  CHECK(job.hosts[1].clock.same_boot_as == 0);
  CHECK(job.alignment_bound_ns == 0);
  CHECK(job.job_steps == 19);
  CHECK_FALSE(job.culprit.found);
  CHECK(job.headline.find("no rank holds the others back") != std::string::npos);
  CHECK(job.warnings.empty());
}

TEST_CASE("job merge: missing ranks and duplicate RANKs are said, not hidden", "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  const auto a = make_host("boot-a", 700'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 0, 10, 10);
  const auto b = make_host("boot-b", 800'000 * kMs, wall0, 0, {{1, 1, 0}}, 0, 10, 10);
  const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
  REQUIRE(job.ranks.size() == 3);
  bool missing = false, duplicate = false;
  for (const auto& w : job.warnings) {
    missing = missing || w.find("WORLD_SIZE is 4 but the captures hold 3") != std::string::npos;
    duplicate = duplicate || w.find("RANK 1 is claimed by more than one process") != std::string::npos;
  }
  CHECK(missing);
  CHECK(duplicate);
  CHECK(job.ranks[2].global_rank == 2);
  CHECK_FALSE(job.ranks[2].rank_from_launcher);
}

TEST_CASE("job merge: rank ranges", "[multinode]") {
  CHECK(rank_ranges({3, 0, 1, 2, 7, 9, 10}) == "0-3,7,9-10");
  CHECK(rank_ranges({}).empty());
  CHECK(rank_ranges({5, 5}) == "5");
}

TEST_CASE("one host of a bigger job: its collective wait is for a rank on another host", "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  auto a = make_host("boot-a", 700'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 0, 10, 10);
  note_remote_ranks(a.job, a.analysis.notes);
  CHECK(a.job.verdict.headline.rfind("the ranks here wait on a rank on another host: ", 0) == 0);
  CHECK(a.job.verdict.recommendation.find("steptrace report A.cap B.cap") != std::string::npos);
  // A local straggler is named by the local verdict: no remote claim then.
  auto b = make_host("boot-b", 700'000 * kMs, wall0, 0, {{2, 1, 0}, {3, 1, 5 * kMs}}, 5 * kMs, 10, 10);
  b.job.verdict.straggler_rank = 1;
  note_remote_ranks(b.job, b.analysis.notes);
  CHECK(b.job.verdict.headline == "collectives gate the accelerator");
  CHECK(b.job.verdict.evidence.back().find("WORLD_SIZE 4; this host traces 2 of the ranks (RANK 2,3)") !=
        std::string::npos);
}

TEST_CASE("job merge: the HTML page puts every rank's steps on the job clock, and escapes what the hosts wrote",
          "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  auto a = make_host("boot-a", 1000'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 14 * kMs, 40, 100);
  auto b = make_host("boot-b", 997'500 * kMs, wall0, 0, {{2, 1, 0}, {3, 1, 14 * kMs}}, 14 * kMs, 40, 100);
  b.source.host = "<script>alert(1)</script>";  // a hostname is the host's to choose
  const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
  const std::string html = job_html(job);
  CHECK(html.find("<script>alert(1)") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  const std::string head = "<script type=\"application/json\" id=\"job-data\">";
  const size_t at = html.find(head);
  REQUIRE(at != std::string::npos);
  const size_t from = at + head.size();
  const auto data = nlohmann::json::parse(html.substr(from, html.find("</script>", from) - from));
  REQUIRE(data["ranks"].size() == 4);
  // 2.5 s apart on the hosts' monotonic clocks, together on the job's: every
  // rank's step k starts at k x 50 ms.
  for (const auto& r : data["ranks"]) {
    INFO("rank " << r["rank"]);
    REQUIRE(r["steps"].size() == 40);
    CHECK(r["steps"][10][0].get<double>() == Approx(500.0).margin(0.01));
    CHECK(r["steps"][10][1].get<double>() == Approx(50.0));
  }
  CHECK(data["ranks"][3]["culprit"] == true);
  CHECK(data["ranks"][0]["culprit"] == false);
  CHECK(data["span_ms"].get<double>() == Approx(2000.0).margin(0.01));
  CHECK(html.find("rank 3 on node 1") != std::string::npos);
}

TEST_CASE("job cut: --steps and --time are one span of the job clock, cut from each host in its own time",
          "[multinode]") {
  const int64_t wall0 = 1'800'000'000'000'000'000;
  // Node 1's monotonic clock reads 2.5 s less at the same instant, and runs
  // 40 ppm fast against its wall clock.
  const auto a = make_host("boot-a", 1000'000 * kMs, wall0, 0, {{0, 0, 0}, {1, 0, 0}}, 14 * kMs, 40, 100);
  const auto b = make_host("boot-b", 997'500 * kMs, wall0, 40, {{2, 1, 0}, {3, 1, 14 * kMs}}, 14 * kMs, 40, 100);
  const JobReport job = merge_job({{"a.cap", &a}, {"b.cap", &b}});
  REQUIRE(job.hosts.size() == 2);
  // The inverse of each host's mapping, to the nanosecond.
  for (const auto& h : job.hosts)
    for (uint64_t m : {997'000 * kMs, 1000'000 * kMs + 123, 1001'999 * kMs + 7}) CHECK(host_time_of(h.clock, h.clock.to_job_ns(m)) == m);

  // Steps 10-20 of rank 0 (node 0): 50 ms steps from node 0's 1000 s.
  auto cuts = job_cuts(job, {1000'000 * kMs, 997'500 * kMs}, {-1, -1, 10, 20});
  REQUIRE(cuts);
  REQUIRE(cuts->size() == 2);
  CHECK((*cuts)[0].absolute);
  CHECK((*cuts)[0].from_ns == 1000'000 * kMs + 500 * kMs);
  CHECK((*cuts)[0].to_ns == 1000'000 * kMs + 1050 * kMs);
  // The same instants on node 1's clock: 2.5 s earlier, less its drift over
  // the half second since its anchor (40 ppm of 0.5 s = 20 us).
  const auto near = [](uint64_t x, uint64_t y) { return (x > y ? x - y : y - x) <= 1000; };
  CHECK(near((*cuts)[1].from_ns, 997'500 * kMs + 500 * kMs - 20'000));
  CHECK(near((*cuts)[1].to_ns, 997'500 * kMs + 1050 * kMs - 42'000));

  // --time 0.25-0.75: after the earlier of the two recording starts (node
  // 1's, started 100 ms before node 0's on the job clock: 100.004 ms by its
  // clock running 40 ppm fast).
  cuts = job_cuts(job, {1000'000 * kMs, 997'400 * kMs}, {0.25, 0.75, -1, -1});
  REQUIRE(cuts);
  CHECK(near((*cuts)[0].from_ns, 1000'000 * kMs + 150 * kMs - 4'000));
  CHECK(near((*cuts)[0].to_ns, 1000'000 * kMs + 650 * kMs - 4'000));

  // A step rank 0 does not have is an error that says so.
  auto bad = job_cuts(job, {1000'000 * kMs, 997'500 * kMs}, {-1, -1, 10, 4000});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("--steps 10-4000: rank 0 does not have both steps") != std::string::npos);
}
