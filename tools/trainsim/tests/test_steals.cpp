// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>

#include "sim/cli.h"
#include "sim/knobs.h"
#include "sim/steals.h"
#include "truth.h"

using namespace trainsim;
namespace st = trainsim::steals;

namespace {
std::string fixture(const std::string &name, const std::string &text)
{
	std::string p = "/tmp/trainsim-steals-" + std::to_string(getpid()) + "-" + name;
	std::ofstream(p) << text;
	return p;
}
} // namespace

TEST_CASE("cgroup discovery: hybrid v1 controllers, then v2", "[unit][steals]")
{
	auto mounts = fixture("mounts", "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
					"cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n"
					"cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
					"cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n");
	auto cg = fixture("cgroup", "4:memory:/a/b\n2:cpu,cpuacct:/\n0::/c\n");
	std::string why;
	auto cpu = st::find_controller("cpu", &why, mounts, cg);
	REQUIRE(cpu);
	CHECK_FALSE(cpu->v2);
	CHECK(cpu->mount == "/sys/fs/cgroup/cpu,cpuacct");
	CHECK(cpu->self == "/");
	auto mem = st::find_controller("memory", &why, mounts, cg);
	REQUIRE(mem);
	CHECK(mem->self == "/a/b");
	CHECK(st::v2_mount(mounts) == "/sys/fs/cgroup/unified");
	// cpuacct is not "cpu"; a controller nowhere is an error naming it
	CHECK_FALSE(st::find_controller("pids", &why, mounts, cg));
	CHECK_THAT(why, Catch::Contains("pids"));
	unlink(mounts.c_str());
	unlink(cg.c_str());
}

TEST_CASE("trace_pipe softirq lines parse", "[unit][steals]")
{
	int pid = 0, cpu = -1;
	int64_t ts = 0;
	bool entry = false;
	REQUIRE(st::parse_softirq_line("   trainsim-main-1234    [000] ..s1. 45403.895145: softirq_entry: vec=3 "
				       "[action=NET_RX]",
				       &pid, &cpu, &ts, &entry));
	CHECK(pid == 1234);
	CHECK(cpu == 0);
	CHECK(ts == 45403895145000);
	CHECK(entry);
	REQUIRE(st::parse_softirq_line("  <idle>-0 [001] d.s2. 7.000001: softirq_exit: vec=3 [action=NET_RX]", &pid, &cpu,
				       &ts, &entry));
	CHECK(pid == 0);
	CHECK(cpu == 1);
	CHECK_FALSE(entry);
	CHECK_FALSE(st::parse_softirq_line("# tracer: nop", &pid, &cpu, &ts, &entry));
	std::vector<st::SoftirqSpan> spans{{10, 20, 1}, {30, 50, 1}, {60, 70, 1}};
	CHECK(st::overlap_ns(spans, 15, 65) == 5 + 20 + 5);
	CHECK(st::overlap_ns(spans, 0, 5) == 0);
}

TEST_CASE("steal knobs validate", "[unit][steals]")
{
	CHECK(parse_cli({"--scenario", "memory-pressure", "--loader-mode", "thread"}).code == 2);
	CHECK(parse_cli({"--scenario", "memory-pressure", "--loader-memory-mb", "4"}).code == 2);
	CHECK(parse_cli({"--scenario", "memory-pressure", "--loader-memory-mb", "1000"}).code == 2);
	CHECK(parse_cli({"--scenario", "throttled", "--throttle-rank", "2"}).code == 2);
	CHECK(parse_cli({"--scenario", "softirq", "--softirq-rank", "1"}).code == 2);
	auto r = parse_cli({"--scenario", "throttled", "--cpu-quota-ms", "40"});
	REQUIRE(r.run);
	CHECK(r.knobs.cpu_quota_ms == 40);
	CHECK(r.knobs.host_ms == 25);
}

TEST_CASE("truth: steal fields round-trip and default to zero", "[unit][steals]")
{
	namespace tr = trainsim::truth;
	tr::Truth t;
	t.scenario = "throttled";
	t.ranks = 1;
	tr::Rank r;
	tr::Step s;
	s.start_ns = 0;
	s.end_ns = 100;
	s.throttled_ns = 30;
	s.loader_memstall_ns = 7;
	s.softirq_ns = 5;
	s.phases.push_back(tr::Phase{"host_compute", tr::kHostOverhead, 0, 100, 40, false, 30, 5});
	tr::compute_breakdown(s);
	r.steps.push_back(s);
	r.steals.cpu_cgroup = "/sys/fs/cgroup/cpu/x";
	r.steals.cpu_quota_us = 30000;
	t.rank_data.push_back(r);
	std::string err;
	auto back = tr::from_json(tr::to_json(t), &err);
	REQUIRE(back);
	const auto &b = back->rank_data[0];
	CHECK(b.steps[0].throttled_ns == 30);
	CHECK(b.steps[0].loader_memstall_ns == 7);
	CHECK(b.steps[0].phases[0].softirq_ns == 5);
	CHECK(b.steals.cpu_quota_us == 30000);
	t.rank_data[0].steals = {};
	t.rank_data[0].steps[0].throttled_ns = 0;
	std::string text = tr::to_json(t);
	CHECK(text.find("\"steals\"") == std::string::npos);
}
