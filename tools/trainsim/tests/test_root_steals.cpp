// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// [root][steals] tests: the throttled, memory-pressure and softirq scenarios
// really plant their cause (per the truth), and clean up after themselves.
// Each runs a few seconds.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "sim/steals.h"
#include "tests/root_util.h"
#include "truth.h"

namespace fs = std::filesystem;
namespace tr = trainsim::truth;
namespace st = trainsim::steals;
using namespace roottest;

namespace {

// Mean over the steps after the first of field(step) / step duration.
template <class F> double mean_share(const tr::Rank &r, F field)
{
	double sum = 0;
	int n = 0;
	for (const auto &s : r.steps)
		if (s.index > 0 && s.duration_ns() > 0) {
			sum += static_cast<double>(field(s)) / static_cast<double>(s.duration_ns());
			n++;
		}
	return n ? sum / n : 0.0;
}

std::string parent_of(const std::string &p)
{
	return p.substr(0, p.rfind('/'));
}

} // namespace

TEST_CASE("throttled: main threads are CFS-throttled, cgroups removed", "[root][steals]")
{
	if (!can_fuse())
		return;
	auto r = run_trainsim({"--scenario", "throttled", "--steps", "25"});
	check_structure(r.truth, 2, 25, 2);
	for (const auto &rk : r.truth.rank_data) {
		INFO("rank " << rk.rank);
		REQUIRE_FALSE(rk.steals.cpu_cgroup.empty());
		CHECK(rk.steals.cpu_quota_us == 30000);
		CHECK(rk.steals.cpu_period_us == 100000);
		double sh = mean_share(rk, [](const tr::Step &s) { return s.throttled_ns; });
		INFO("throttled share " << sh);
		CHECK(sh > 0.10);
		for (const auto &s : rk.steps) {
			int64_t sum = 0;
			for (const auto &p : s.phases)
				sum += p.throttled_ns;
			CHECK(sum <= s.throttled_ns);
		}
		CHECK_FALSE(fs::exists(rk.steals.cpu_cgroup));
		CHECK_FALSE(fs::exists(parent_of(rk.steals.cpu_cgroup)));
	}
}

TEST_CASE("throttled: --throttle-rank 1 throttles only rank 1", "[root][steals]")
{
	if (!can_fuse())
		return;
	auto r = run_trainsim({"--scenario", "throttled", "--steps", "10", "--throttle-rank", "1"});
	CHECK(r.truth.rank_data[0].steals.cpu_cgroup.empty());
	CHECK_FALSE(r.truth.rank_data[1].steals.cpu_cgroup.empty());
	for (const auto &s : r.truth.rank_data[0].steps)
		CHECK(s.throttled_ns == 0);
}

TEST_CASE("memory-pressure: loaders stall in memcg reclaim, main waits for data", "[root][steals]")
{
	if (!can_fuse())
		return;
	auto r = run_trainsim({"--scenario", "memory-pressure", "--steps", "30"});
	check_structure(r.truth, 2, 30, 1);
	for (const auto &rk : r.truth.rank_data) {
		INFO("rank " << rk.rank);
		const auto &x = rk.steals;
		REQUIRE_FALSE(x.loader_memory_cgroup.empty());
		CHECK(x.loader_memory_limit_bytes == 18ll << 20);
		CHECK(x.loader_psi_cgroups.size() == 1);
		int64_t total = 0, steps_with = 0;
		for (const auto &s : rk.steps) {
			total += s.loader_memstall_ns;
			steps_with += s.loader_memstall_ns > 0;
			CHECK(s.loader_memstall_ns <= s.duration_ns() + 1000000);
		}
		CHECK(total > 0);
		CHECK(steps_with >= static_cast<int64_t>(rk.steps.size()) / 2); // it keeps growing
		double sh = mean_share(rk, [](const tr::Step &s) { return s.loader_memstall_ns; });
		double dl = mean_share(rk, [](const tr::Step &s) { return s.breakdown.at(tr::kDataLoading); });
		INFO("memstall share " << sh << ", data_loading " << dl);
		CHECK(sh > 0.01);
		CHECK(dl > 0.2);
		// Evidence of reclaim: the limit was hit (v1 failcnt / v2 events_max) or pages scanned.
		int64_t hits = 0;
		for (const char *key : {"failcnt", "events_max", "events_high", "pgscan"})
			if (x.loader_memory_counters.count(key))
				hits += x.loader_memory_counters.at(key);
		CHECK(hits > 0);
		CHECK_FALSE(fs::exists(x.loader_memory_cgroup));
		CHECK_FALSE(fs::exists(x.loader_psi_cgroup));
		CHECK_FALSE(fs::exists(parent_of(x.loader_psi_cgroup)));
	}
}

TEST_CASE("memory-pressure: a dataset on tmpfs cannot plant it (exit 2)", "[root][steals]")
{
	if (!can_fuse() || !fs::is_directory("/dev/shm"))
		return;
	std::string dir = "/dev/shm/trainsim-test-data-" + std::to_string(getpid());
	std::string log = temp_dir("trainsim-test-log-") + "/log";
	int code = wait_exit(spawn({kBin + "/trainsim", "--scenario", "memory-pressure", "--steps", "2", "--data-dir", dir},
				   log));
	std::string text = slurp(log);
	fs::remove_all(dir);
	fs::remove_all(parent_of(log));
	INFO(text);
	CHECK(code == 2);
	CHECK_THAT(text, Catch::Contains("disk-backed"));
}

TEST_CASE("softirq: NET_RX runs on the main thread, rps_cpus restored", "[root][steals]")
{
	if (!can_fuse())
		return;
	std::string before = st::read_file(st::kRpsCpus);
	// Its tracefs instance is removed at the end; one an earlier, killed run
	// left on this host is not this run's.
	std::set<std::string> instances_before;
	std::error_code ec;
	for (const auto &e : fs::directory_iterator("/sys/kernel/tracing/instances", ec))
		instances_before.insert(e.path().filename().string());
	auto r = run_trainsim({"--scenario", "softirq", "--steps", "40"});
	check_structure(r.truth, 1, 40, 2);
	const auto &rk = r.truth.rank_data[0];
	CHECK(rk.steals.softirq_cpu == 0);
	CHECK_FALSE(rk.steals.softirq_method.empty());
	double sh = mean_share(rk, [](const tr::Step &s) { return s.softirq_ns; });
	INFO("softirq share " << sh);
	CHECK(sh > 0.05);
	int64_t in_host = 0, total = 0;
	for (const auto &s : rk.steps) {
		int64_t sum = 0;
		for (const auto &p : s.phases) {
			sum += p.softirq_ns;
			if (p.name == "host_compute")
				in_host += p.softirq_ns;
		}
		CHECK(sum <= s.softirq_ns);
		total += s.softirq_ns;
	}
	CHECK(in_host > total / 2);
	CHECK(st::read_file(st::kRpsCpus) == before);
	for (const auto &e : fs::directory_iterator("/sys/kernel/tracing/instances", ec)) {
		const std::string name = e.path().filename().string();
		if (!instances_before.count(name))
			CHECK(name.rfind("trainsim-", 0) != 0);
	}
}
