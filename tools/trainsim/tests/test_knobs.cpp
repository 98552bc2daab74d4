// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <catch2/catch.hpp>

#include "sim/cli.h"
#include "sim/knobs.h"
#include "sim/rank.h"
#include "sim_protocol.h"

#include <cstring>

using namespace trainsim;

TEST_CASE("every named scenario resolves and validates", "[unit][knobs]")
{
	REQUIRE(scenario_names().size() == 10);
	for (const auto &n : scenario_names()) {
		auto k = scenario_knobs(n);
		REQUIRE(k);
		CHECK(k->scenario == n);
		CHECK(validate(*k).empty());
	}
	CHECK_FALSE(scenario_knobs("gpu-bound"));
}

TEST_CASE("scenarios plant the bottleneck they are named after", "[unit][knobs]")
{
	Knobs base = *scenario_knobs("compute-bound");
	CHECK(scenario_knobs("data-bound")->preprocess_ms > base.preprocess_ms);
	CHECK(scenario_knobs("data-bound")->loader_workers < base.loader_workers);
	CHECK(scenario_knobs("dma-bound")->copy_chunk_bytes < base.copy_chunk_bytes);
	CHECK(scenario_knobs("dma-bound")->pcie_gbps < base.pcie_gbps);
	CHECK(scenario_knobs("collective-bound")->host_cc_bytes > 0);
	CHECK(scenario_knobs("collective-bound")->net_mbit > 0);
	CHECK(scenario_knobs("straggler")->straggler_rank == base.ranks - 1);
	CHECK(scenario_knobs("host-bound")->host_ms > base.host_ms);
	CHECK(scenario_knobs("contention")->noise_per_cpu > 0);
}

TEST_CASE("CLI: explicit knobs override the scenario, the rest keep its values", "[unit][cli]")
{
	auto r = parse_cli({"--scenario", "data-bound", "--compute-ms", "5", "--sample-bytes", "64k"});
	REQUIRE(r.run);
	CHECK(r.knobs.scenario == "data-bound");
	CHECK(r.knobs.compute_ms == 5);
	CHECK(r.knobs.sample_bytes == 64 * 1024);
	CHECK(r.knobs.preprocess_ms == scenario_knobs("data-bound")->preprocess_ms);
	CHECK(r.knobs.loader_workers == 1);
}

TEST_CASE("CLI: defaults are the compute-bound scenario", "[unit][cli]")
{
	auto r = parse_cli(std::vector<std::string>{});
	REQUIRE(r.run);
	CHECK(r.knobs.scenario == "compute-bound");
	CHECK(r.knobs.ranks == 2);
	CHECK(r.knobs.steps == 20);
}

TEST_CASE("CLI: straggler follows --ranks unless given", "[unit][cli]")
{
	auto r = parse_cli({"--scenario", "straggler", "--ranks", "4"});
	REQUIRE(r.run);
	CHECK(r.knobs.straggler_rank == 3);
	auto r2 = parse_cli({"--scenario", "straggler", "--ranks", "4", "--straggler-rank", "1"});
	REQUIRE(r2.run);
	CHECK(r2.knobs.straggler_rank == 1);
}

TEST_CASE("CLI: --duration without --steps runs until the deadline", "[unit][cli]")
{
	auto r = parse_cli({"--duration", "3"});
	REQUIRE(r.run);
	CHECK(r.knobs.steps > 1000);
	auto r2 = parse_cli({"--duration", "3", "--steps", "7"});
	REQUIRE(r2.run);
	CHECK(r2.knobs.steps == 7);
}

TEST_CASE("CLI: bad input gives a clear error and exit code 2", "[unit][cli]")
{
	struct Bad {
		std::vector<std::string> args;
		const char *needle;
	};
	std::vector<Bad> bad{
		{{"--scenario", "gpu-bound"}, "gpu-bound"},
		{{"--ranks", "0"}, "--ranks"},
		{{"--sample-bytes", "1000"}, "multiple of 4096"},
		{{"--straggler-rank", "5"}, "does not exist"},
		{{"--noise-cpus", "1-0"}, "--noise-cpus"},
		{{"--loader-mode", "fiber"}, "fiber"},
		{{"--pcie-gbps", "0"}, "--pcie-gbps"},
		{{"--no-such-knob"}, "no-such-knob"},
	};
	for (const auto &b : bad) {
		auto r = parse_cli(b.args);
		INFO(b.args[0]);
		CHECK_FALSE(r.run);
		CHECK(r.code == 2);
		CHECK_THAT(r.error, Catch::Contains(b.needle));
	}
}

TEST_CASE("cpu lists parse like taskset", "[unit][knobs]")
{
	CHECK(*parse_cpu_list("") == std::vector<int>{});
	CHECK(*parse_cpu_list("0") == std::vector<int>{0});
	CHECK(*parse_cpu_list("0,2-4") == std::vector<int>{0, 2, 3, 4});
	CHECK_FALSE(parse_cpu_list("a"));
	CHECK_FALSE(parse_cpu_list("1,,2"));
	CHECK_FALSE(parse_cpu_list("3-1"));
}

TEST_CASE("the program bytes carry the knobs the device needs", "[unit][knobs]")
{
	Knobs k = *scenario_knobs("collective-bound");
	k.compute_ms = 12.5;
	std::string neff = build_neff(k, 4096);
	REQUIRE(neff.size() == 4096);
	trainsim_neff n;
	memcpy(&n, neff.data(), sizeof(n));
	CHECK(n.magic == TRAINSIM_NEFF_MAGIC);
	CHECK(n.compute_ns == 12500000);
	CHECK(n.cc_bytes == k.device_cc_bytes);
	CHECK(n.cc_ranks == static_cast<uint32_t>(k.ranks));
	CHECK(n.input_queues == static_cast<uint32_t>(k.input_queues));
}

TEST_CASE("knobs: --node-netns and --node-addrs name one namespace and one IPv4 address per node", "[unit][knobs]")
{
	Knobs k;
	k.ranks = 4;
	k.nnodes = 2;
	CHECK(validate(k).empty()); // neither: every rank on loopback
	k.node_netns = "n0,n1";
	k.node_addrs = "10.0.0.1,10.0.0.2";
	CHECK(validate(k).empty());
	k.node_addrs = "10.0.0.1";
	CHECK(validate(k).find("one entry per node (2), got 2 and 1") != std::string::npos);
	k.node_addrs = "10.0.0.1,not-an-address";
	CHECK(validate(k).find("'not-an-address' is not an IPv4 address") != std::string::npos);
	k.node_addrs = "10.0.0.1,10.0.0.2";
	k.node_netns = "n0,../etc";
	CHECK(validate(k).find("'../etc' is not a namespace name") != std::string::npos);
	k.node_netns = "";
	CHECK_FALSE(validate(k).empty()); // addresses without namespaces
}
