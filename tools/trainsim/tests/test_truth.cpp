// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

#include "truth.h"

using namespace trainsim::truth;

namespace {
// A 100 ms step: 40 data wait, 10 gap, 30 busy-wait compute (with 20 run
// delay that must not count), 20 host compute with 5 run delay.
Step sample_step(int index, int64_t base)
{
	Step s;
	s.index = index;
	s.start_ns = base;
	s.end_ns = base + 100;
	s.phases = {
		{"data_wait", kDataLoading, base + 0, base + 40, 0, false},
		{"exec_compute", kDeviceExecute, base + 50, base + 80, 20, true},
		{"host_compute", kHostOverhead, base + 80, base + 100, 5, false},
	};
	s.device_compute_ns = 30;
	compute_breakdown(s);
	return s;
}

Truth sample_truth(int steps)
{
	Truth t;
	t.scenario = "data-bound";
	t.knobs_json = R"({"ranks":1})";
	t.ranks = 1;
	t.devices = {"/tmp/x/neuron0"};
	t.libnrt = "/build/libnrt.so.1";
	Rank r;
	r.rank = 0;
	r.pid = 4242;
	r.main_tid = 4242;
	r.loader_pids = {4243};
	r.loader_tids = {4243};
	for (int i = 0; i < steps; i++)
		r.steps.push_back(sample_step(i, 1000 + i * 100));
	t.rank_data.push_back(r);
	return t;
}

TracerResult perfect_tracer(const Truth &t)
{
	TracerResult res;
	for (const auto &r : t.rank_data) {
		TracerRank tr;
		tr.pid = r.pid;
		for (const auto &s : r.steps)
			tr.steps.push_back({s.start_ns, s.end_ns, s.breakdown});
		res.ranks.push_back(tr);
	}
	return res;
}
} // namespace

TEST_CASE("breakdown: run delay is contention except in busy-wait, gaps are other", "[unit][truth]")
{
	Step s = sample_step(0, 0);
	CHECK(s.breakdown.at(kDataLoading) == 40);
	CHECK(s.breakdown.at(kOther) == 10);
	CHECK(s.breakdown.at(kDeviceExecute) == 30);
	CHECK(s.breakdown.at(kHostOverhead) == 15);
	CHECK(s.breakdown.at(kCpuContention) == 5);
	int64_t sum = 0;
	for (const auto &[c, v] : s.breakdown)
		sum += v;
	CHECK(sum == s.duration_ns());
	CHECK(s.gating == kDataLoading);
	auto sh = shares(s);
	CHECK(sh.at(kDataLoading) == Approx(0.40));
	CHECK(sh.size() == categories().size());
}

TEST_CASE("breakdown clamps run delay to the phase and overlapping phases", "[unit][truth]")
{
	Step s;
	s.start_ns = 0;
	s.end_ns = 10;
	s.phases = {{"a", kHostOverhead, 0, 6, 100, false}, {"b", kCollective, 4, 10, 0, false}};
	compute_breakdown(s);
	CHECK(s.breakdown.at(kCpuContention) == 6);
	CHECK(s.breakdown.at(kHostOverhead) == 0);
	CHECK(s.breakdown.at(kCollective) == 4); // overlap counted once
	CHECK(s.gating == kCpuContention);
}

TEST_CASE("truth JSON round trip", "[unit][truth]")
{
	Truth t = sample_truth(3);
	t.nnodes = 2;
	t.rank_data[0].node = 1;
	std::string err;
	auto back = from_json(to_json(t), &err);
	INFO(err);
	REQUIRE(back);
	CHECK(back->scenario == t.scenario);
	CHECK(back->ranks == 1);
	CHECK(back->devices == t.devices);
	CHECK(back->libnrt == t.libnrt);
	CHECK(back->knobs_json == R"({"ranks":1})");
	REQUIRE(back->rank_data.size() == 1);
	const Rank &r = back->rank_data[0];
	CHECK(r.pid == 4242);
	CHECK(back->nnodes == 2);
	CHECK(r.node == 1);
	CHECK(r.loader_tids == std::vector<int>{4243});
	REQUIRE(r.steps.size() == 3);
	CHECK(r.steps[2].start_ns == 1200);
	CHECK(r.steps[2].phases.size() == 3);
	CHECK(r.steps[2].phases[1].busy_wait);
	CHECK(r.steps[2].phases[1].run_delay_ns == 20);
	CHECK(r.steps[2].breakdown == t.rank_data[0].steps[2].breakdown);
	CHECK(r.steps[2].gating == kDataLoading);

	char path[] = "/tmp/trainsim-truth-test-XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	REQUIRE(save(t, path, &err));
	auto loaded = load(path, &err);
	unlink(path);
	REQUIRE(loaded);
	CHECK(to_json(*loaded) == to_json(t));
}

TEST_CASE("truth JSON errors are reported, not thrown", "[unit][truth]")
{
	std::string err;
	CHECK_FALSE(from_json("{", &err));
	CHECK_THAT(err, Catch::Contains("bad truth JSON"));
	CHECK_FALSE(from_json(R"({"format":"other"})", &err));
	CHECK_THAT(err, Catch::Contains("not a trainsim truth file"));
	std::string j = to_json(sample_truth(1));
	auto pos = j.find("\"data_loading\"", j.find("\"phases\""));
	REQUIRE(pos != std::string::npos);
	j.replace(pos, 14, "\"disk_loading\"");
	CHECK_FALSE(from_json(j, &err));
	CHECK_THAT(err, Catch::Contains("disk_loading"));
	CHECK_FALSE(load("/nonexistent/truth.json", &err));
}

TEST_CASE("compare: a perfect tracer has zero error", "[unit][compare]")
{
	Truth t = sample_truth(5);
	Comparison c = compare(t, perfect_tracer(t));
	CHECK(c.truth_steps == 4); // step 0 skipped
	CHECK(c.matched_steps == 4);
	CHECK(c.tracer_steps == 4);
	CHECK(c.step_count_match);
	CHECK(c.max_share_error_pp == Approx(0.0));
	CHECK(c.mean_step_duration_error_pct == Approx(0.0));
	CHECK(c.gating_agreement == Approx(1.0));
	CHECK(c.unmatched_ranks.empty());
	CHECK_THAT(c.summary(), Catch::Contains("(match)"));
}

TEST_CASE("compare: share error in percentage points and duration error", "[unit][compare]")
{
	Truth t = sample_truth(3);
	TracerResult tr = perfect_tracer(t);
	for (auto &s : tr.ranks[0].steps) {
		// Tracer calls 10 ns of data loading "other" and sees the step 10% long.
		s.category_ns[kDataLoading] -= 10;
		s.category_ns[kOther] += 10;
		s.end_ns += 10;
	}
	Comparison c = compare(t, tr, CompareOptions{0});
	REQUIRE(c.matched_steps == 3);
	// truth data share 40%, tracer 30/110 = 27.27% -> 12.73 pp
	CHECK(c.share_error_pp.at(kDataLoading) == Approx(40.0 - 3000.0 / 110.0).epsilon(1e-6));
	CHECK(c.share_error_pp.at(kOther) == Approx(20.0 / 110.0 * 100.0 - 10.0).epsilon(1e-6));
	CHECK(c.mean_step_duration_error_pct == Approx(10.0));
	CHECK(c.max_share_error_pp == Approx(c.share_error_pp.at(kDataLoading)));
}

TEST_CASE("compare: a boundary moved across the main thread's runqueue wait is no duration error", "[unit][compare]")
{
	Truth t = sample_truth(3);
	TracerResult tr = perfect_tracer(t);
	auto &steps = tr.ranks[0].steps;
	// The tracer ends step 0 and begins step 1 six ticks late: four of them
	// the main thread spent runnable, two running.
	const int64_t b = steps[1].start_ns;
	steps[0].end_ns = b + 6;
	steps[1].start_ns = b + 6;
	Comparison plain = compare(t, tr, CompareOptions{0});
	tr.ranks[0].runnable = {{b - 50, b - 40}, {b + 1, b + 5}};
	Comparison c = compare(t, tr, CompareOptions{0});
	REQUIRE(c.matched_steps == 3);
	// Steps are 100 long: without the waits 6 % off twice, with them 2 %.
	CHECK(plain.mean_step_duration_error_pct == Approx(12.0 / 3));
	CHECK(c.mean_step_duration_error_pct == Approx(4.0 / 3));
	CHECK(uncovered_ns(b + 6, b, tr.ranks[0].runnable) == 2);
	CHECK(uncovered_ns(b - 60, b - 30, tr.ranks[0].runnable) == 20);
	CHECK(uncovered_ns(b + 2, b + 3, tr.ranks[0].runnable) == 0);
}

TEST_CASE("compare: missing steps and ranks are visible", "[unit][compare]")
{
	Truth t = sample_truth(4);
	TracerResult tr = perfect_tracer(t);
	tr.ranks[0].steps.erase(tr.ranks[0].steps.begin() + 2);
	Comparison c = compare(t, tr);
	CHECK(c.truth_steps == 3);
	CHECK(c.matched_steps == 2);
	CHECK_FALSE(c.step_count_match);

	TracerResult wrong_pid = perfect_tracer(t);
	wrong_pid.ranks[0].pid = 1;
	Comparison c2 = compare(t, wrong_pid);
	CHECK(c2.unmatched_ranks == std::vector<std::string>{"0"});
	CHECK(c2.matched_steps == 0);
	CHECK_FALSE(c2.step_count_match);

	TracerResult by_rank = perfect_tracer(t);
	by_rank.ranks[0].pid = 1;
	by_rank.ranks[0].rank = 0; // explicit rank wins over pid
	CHECK(compare(t, by_rank).step_count_match);
}
