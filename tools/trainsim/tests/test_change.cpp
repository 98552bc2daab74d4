// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The mid-run change (--change-at-step) and the hang (--hang-rank): parsing,
// validation, the knobs each rank sees, and their ground truth.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "sim/cli.h"
#include "sim/knobs.h"
#include "truth.h"

using namespace trainsim;
namespace tr = trainsim::truth;

namespace {
// The error message of a command line that must fail with exit code 2.
std::string cli_error(const std::vector<std::string> &args)
{
	auto r = parse_cli(args);
	INFO(r.error);
	CHECK_FALSE(r.run);
	CHECK(r.code == 2);
	return r.error;
}
} // namespace

TEST_CASE("change: KNOB=VALUE lists, repeatable, sizes with suffixes", "[unit][change]")
{
	auto r = parse_cli({"--change-at-step", "5", "--change", "preprocess-ms=40,compute-ms=12.5", "--change",
			    "host-ms=0", "--change", "copy-bytes=2m"});
	REQUIRE(r.run);
	const KnobChange &c = r.knobs.change;
	CHECK(c.step == 5);
	CHECK(c.rank == -1);
	CHECK(c.active());
	CHECK(*c.preprocess_ms == 40);
	CHECK(*c.compute_ms == 12.5);
	CHECK(*c.host_ms == 0);
	CHECK(*c.copy_bytes == 2u << 20);
	CHECK(c.applies_to(0));
	CHECK(c.applies_to(1));

	CHECK(parse_size("4096") == 4096u);
	CHECK(parse_size("64k") == 65536u);
	CHECK(parse_size("1MiB") == 1u << 20);
	CHECK(parse_size("2G") == 2ull << 30);
	CHECK_FALSE(parse_size("-1"));
	CHECK_FALSE(parse_size("1t"));
	CHECK_FALSE(parse_size("k"));
}

TEST_CASE("change: --change-rank limits it to one rank", "[unit][change]")
{
	auto r = parse_cli({"--change-at-step", "3", "--change", "preprocess-ms=90", "--change-rank", "1"});
	REQUIRE(r.run);
	CHECK_FALSE(r.knobs.change.applies_to(0));
	CHECK(r.knobs.change.applies_to(1));
	Knobs r0 = knobs_after_change(r.knobs, 0), r1 = knobs_after_change(r.knobs, 1);
	CHECK(r0.preprocess_ms == r.knobs.preprocess_ms);
	CHECK(r1.preprocess_ms == 90);
	CHECK(r1.compute_ms == r.knobs.compute_ms); // knobs not named keep their values
}

TEST_CASE("change: bad specs and steps fail with exit code 2", "[unit][change]")
{
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "batch-ms=4"}), Catch::Contains("unknown knob 'batch-ms'"));
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "compute-ms"}), Catch::Contains("KNOB=VALUE"));
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "compute-ms=fast"}), Catch::Contains("cannot parse"));
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "compute-ms=1,compute-ms=2"}),
		   Catch::Contains("given twice"));
	CHECK_THAT(cli_error({"--change-at-step", "0", "--change", "compute-ms=1"}), Catch::Contains("--change-at-step"));
	CHECK_THAT(cli_error({"--steps", "10", "--change-at-step", "10", "--change", "compute-ms=1"}),
		   Catch::Contains("--change-at-step must be 1..9"));
	CHECK_THAT(cli_error({"--change-at-step", "3"}), Catch::Contains("needs --change"));
	CHECK_THAT(cli_error({"--change", "compute-ms=1"}), Catch::Contains("needs --change-at-step"));
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "host-ms=-1"}), Catch::Contains(">= 0"));
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "copy-bytes=2g"}), Catch::Contains("1 GiB"));
	CHECK_THAT(cli_error({"--change-at-step", "3", "--change", "host-ms=1", "--change-rank", "2"}),
		   Catch::Contains("--change-rank 2 does not exist"));
	CHECK_THAT(cli_error({"--change-rank", "1"}), Catch::Contains("--change-rank needs"));
}

TEST_CASE("hang: options, defaults and validation", "[unit][hang]")
{
	auto r = parse_cli({"--hang-rank", "1", "--hang-at-step", "5"});
	REQUIRE(r.run);
	CHECK(r.knobs.hang.active());
	CHECK(r.knobs.hang.seconds == 30);
	CHECK(r.knobs.hang.kind == HangKind::kSleep);
	CHECK(r.knobs.hang.ms() == 30000);
	CHECK(peer_wait_timeout_ms(r.knobs) == 60000);

	r = parse_cli({"--hang-rank", "0", "--hang-at-step", "0", "--hang-s", "2.5", "--hang-kind", "dread"});
	REQUIRE(r.run);
	CHECK(r.knobs.hang.kind == HangKind::kDread);
	CHECK(r.knobs.hang.ms() == 2500);
	CHECK(std::string(hang_kind_name(r.knobs.hang.kind)) == "dread");

	auto none = parse_cli(std::vector<std::string>{});
	REQUIRE(none.run);
	CHECK_FALSE(none.knobs.hang.active());
	CHECK(peer_wait_timeout_ms(none.knobs) == 30000);

	CHECK_THAT(cli_error({"--hang-rank", "2", "--hang-at-step", "1"}), Catch::Contains("--hang-rank 2 does not exist"));
	CHECK_THAT(cli_error({"--hang-rank", "1"}), Catch::Contains("go together"));
	CHECK_THAT(cli_error({"--hang-at-step", "1"}), Catch::Contains("go together"));
	CHECK_THAT(cli_error({"--steps", "5", "--hang-rank", "1", "--hang-at-step", "5"}), Catch::Contains("0..4"));
	CHECK_THAT(cli_error({"--hang-rank", "1", "--hang-at-step", "1", "--hang-s", "0"}), Catch::Contains("--hang-s"));
	CHECK_THAT(cli_error({"--hang-s", "3"}), Catch::Contains("need --hang-rank"));
	CHECK(cli_error({"--hang-rank", "1", "--hang-at-step", "1", "--hang-kind", "spin"}).find("--hang-kind") !=
	      std::string::npos);
}

TEST_CASE("change and hang are in the knobs JSON", "[unit][change][hang]")
{
	auto r = parse_cli({"--change-at-step", "4", "--change", "preprocess-ms=40,copy-bytes=4k", "--hang-rank", "1",
			    "--hang-at-step", "6", "--hang-kind", "dread"});
	REQUIRE(r.run);
	auto j = nlohmann::json::parse(knobs_to_json(r.knobs));
	CHECK(j["change_at_step"] == 4);
	CHECK(j["change_rank"] == -1);
	CHECK(j["change"]["preprocess-ms"] == 40);
	CHECK(j["change"]["copy-bytes"] == 4096);
	CHECK(j["hang_rank"] == 1);
	CHECK(j["hang_at_step"] == 6);
	CHECK(j["hang_kind"] == "dread");
	auto plain = nlohmann::json::parse(knobs_to_json(*scenario_knobs("compute-bound")));
	CHECK(plain["change_at_step"] == -1);
	CHECK(plain["change"].empty());
}

TEST_CASE("truth: change and hang records round-trip, absent when not planted", "[unit][truth][change][hang]")
{
	tr::Truth t;
	t.scenario = "data-bound";
	t.ranks = 2;
	std::string err;
	auto plain = tr::from_json(tr::to_json(t), &err);
	REQUIRE(plain);
	CHECK_FALSE(plain->change);
	CHECK_FALSE(plain->hang);
	auto pj = nlohmann::json::parse(tr::to_json(t));
	CHECK_FALSE(pj.contains("change"));
	CHECK_FALSE(pj.contains("hang"));

	t.change = tr::Change{6, 1, {{"preprocess-ms", 40}, {"compute-ms", 12.5}}};
	t.hang = tr::Hang{1, 5, "dread", 4321, 4321, 3, 1000, 3001000};
	auto j = nlohmann::json::parse(tr::to_json(t));
	CHECK(j["change"]["step"] == 6);
	CHECK(j["change"]["rank"] == 1);
	CHECK(j["change"]["knobs"]["preprocess-ms"].is_number_integer()); // 40, not 40.0
	CHECK(j["change"]["knobs"]["compute-ms"] == 12.5);
	CHECK(j["hang"]["kind"] == "dread");
	CHECK(j["hang"]["tid"] == 4321);
	CHECK(j["hang"]["end_ns"] == 3001000);
	auto back = tr::from_json(tr::to_json(t), &err);
	REQUIRE(back);
	REQUIRE(back->change);
	CHECK(back->change->knobs.at("compute-ms") == 12.5);
	REQUIRE(back->hang);
	CHECK(back->hang->rank == 1);
	CHECK(back->hang->step == 5);
	CHECK(back->hang->start_ns == 1000);
	CHECK(back->hang->seconds == 3);
}
