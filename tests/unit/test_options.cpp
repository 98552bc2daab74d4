// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <vector>

#include "cli/options.h"
#include "steptrace_abi.h"

using namespace steptrace;

namespace {
Result<Options> parse(std::vector<const char*> args, int* code) {
  args.insert(args.begin(), "steptrace");
  return parse_options(static_cast<int>(args.size()), args.data(), code);
}
}  // namespace

TEST_CASE("options: run takes the job after --", "[cli]") {
  int code = -1;
  auto o = parse({"run", "-d", "2.5", "--accel-dev", "/dev/neuron0", "--", "python", "-c", "x"}, &code);
  REQUIRE(o.ok());
  CHECK(code == 0);
  CHECK(o->command == CommandKind::run);
  CHECK(o->argv == std::vector<std::string>{"python", "-c", "x"});
  CHECK(o->duration_s == 2.5);
  CHECK(o->accel_devs == std::vector<std::string>{"/dev/neuron0"});
  CHECK(o->subsystems ==
        (ST_SUB_SCHED | ST_SUB_BLOCK | ST_SUB_NET | ST_SUB_ACCEL | ST_SUB_UPROBE | ST_SUB_STEAL | ST_SUB_SAMPLE));
  CHECK(o->sample_hz == 49);
}

TEST_CASE("options: the stack sampler's rate and the folded output", "[cli]") {
  int code = -1;
  auto o = parse({"run", "--sample-hz", "0", "--folded", "/tmp/x.folded", "--", "true"}, &code);
  REQUIRE(o.ok());
  CHECK(o->sample_hz == 0);
  CHECK(o->folded_path == "/tmp/x.folded");
  CHECK_FALSE(parse({"run", "--sample-hz", "5000", "--", "true"}, &code).ok());
  auto c = parse({"run", "--collectors", "sched,sample", "--", "true"}, &code);
  REQUIRE(c.ok());
  CHECK(c->subsystems == (ST_SUB_SCHED | ST_SUB_SAMPLE));
}

TEST_CASE("options: everything after -- is the job's, even after a repeatable option", "[cli]") {
  // CLI11 once took the job's --duration 60 (and -v) as steptrace's own when
  // a vector option (--accel-dev, --rdma-dev) came before the "--".
  for (const char* cmd : {"run", "top"}) {
    INFO(cmd);
    int code = -1;
    auto o = parse({cmd, "--accel-dev", "/dev/neuron0", "--rdma-dev", "/dev/uverbs0", "--", "trainsim", "--duration",
                    "60", "-v", "--json", "x", "--", "-d"},
                   &code);
    REQUIRE(o.ok());
    CHECK(o->argv == std::vector<std::string>{"trainsim", "--duration", "60", "-v", "--json", "x", "--", "-d"});
    CHECK(o->duration_s == 0);
    CHECK(o->verbose == 0);
    CHECK(o->json_path.empty());
    CHECK(o->accel_devs == std::vector<std::string>{"/dev/neuron0"});
    CHECK(o->rdma_devs == std::vector<std::string>{"/dev/uverbs0"});
  }
  int code = -1;
  auto rec = parse({"record", "-o", "/tmp/x.cap", "--accel-dev", "/a", "--accel-dev", "/b", "--", "job", "-o", "y",
                    "--duration", "5"},
                   &code);
  REQUIRE(rec.ok());
  CHECK(rec->record_path == "/tmp/x.cap");
  CHECK(rec->argv == std::vector<std::string>{"job", "-o", "y", "--duration", "5"});
  CHECK(rec->duration_s == 0);
  // The job named before a "--" of its own: that "--" stays the job's.
  auto own = parse({"run", "echo", "--", "-d", "3"}, &code);
  REQUIRE(own.ok());
  CHECK(own->argv == std::vector<std::string>{"echo", "--", "-d", "3"});
  CHECK(own->duration_s == 0);
  // Commands that launch nothing refuse a "--".
  auto att = parse({"attach", "-p", "1", "--", "x"}, &code);
  CHECK_FALSE(att.ok());
  CHECK(code == 2);
}

TEST_CASE("options: run without -- keeps the job's own flags", "[cli]") {
  int code = -1;
  auto o = parse({"run", "ls", "-l", "/"}, &code);
  REQUIRE(o.ok());
  CHECK(o->argv == std::vector<std::string>{"ls", "-l", "/"});
}

TEST_CASE("options: attach needs exactly one target", "[cli]") {
  int code = -1;
  CHECK_FALSE(parse({"attach"}, &code).ok());
  CHECK(code != 0);
  CHECK_FALSE(parse({"attach", "-p", "1", "--all"}, &code).ok());
  auto o = parse({"attach", "-p", "10,20", "--collectors", "sched,accel"}, &code);
  REQUIRE(o.ok());
  CHECK(o->target.pids == std::vector<uint32_t>{10, 20});
  CHECK(o->subsystems == (ST_SUB_SCHED | ST_SUB_ACCEL));
  auto all = parse({"attach", "--all", "-d", "1"}, &code);
  REQUIRE(all.ok());
  CHECK(all->target.all);
}

TEST_CASE("options: invalid values are rejected with the reason", "[cli]") {
  int code = -1;
  auto r = parse({"attach", "-p", "0"}, &code);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("invalid pid '0'") != std::string::npos);
  r = parse({"run", "--ring-mib", "3", "--", "true"}, &code);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("power of two") != std::string::npos);
  r = parse({"run", "-d", "-1", "--", "true"}, &code);
  CHECK_FALSE(r.ok());
  r = parse({"attach", "-p", "1", "stray"}, &code);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("stray") != std::string::npos);
  // An option record does not know, before the job: not taken for its command.
  for (auto args : {std::vector<const char*>{"record", "-o", "x.cap", "-q", "--", "/bin/true"},
                    std::vector<const char*>{"run", "-q", "--", "/bin/true"}}) {
    INFO(args[0]);
    r = parse(args, &code);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("unknown option '-q'") != std::string::npos);
  }
}

TEST_CASE("options: pid and collector lists", "[cli]") {
  CHECK(parse_pid_csv("1,2,3").value() == std::vector<uint32_t>{1, 2, 3});
  CHECK_FALSE(parse_pid_csv("").ok());
  CHECK_FALSE(parse_pid_csv("1,,2").ok());
  CHECK_FALSE(parse_pid_csv("1,").ok());
  CHECK_FALSE(parse_pid_csv("-5").ok());
  CHECK_FALSE(parse_pid_csv("99999999999999").ok());
  CHECK(parse_subsystems("block").value() == ST_SUB_BLOCK);
  CHECK_FALSE(parse_subsystems("").ok());
  CHECK_FALSE(parse_subsystems("sched,nope").ok());
}

TEST_CASE("options: how a launched job is stopped", "[cli]") {
  int code = -1;
  auto o = parse({"run", "--", "true"}, &code);
  REQUIRE(o.ok());
  CHECK(o->kill_after_s == 10);
  CHECK_FALSE(o->keep_running);
  o = parse({"run", "--kill-after", "2.5", "--keep-running", "--", "true"}, &code);
  REQUIRE(o.ok());
  CHECK(o->kill_after_s == 2.5);
  CHECK(o->keep_running);
  o = parse({"top", "--kill-after", "0", "--", "true"}, &code);
  REQUIRE(o.ok());
  CHECK(o->kill_after_s == 0);
  CHECK_FALSE(parse({"run", "--kill-after", "-1", "--", "true"}, &code).ok());
  CHECK_FALSE(parse({"attach", "--keep-running", "-p", "1"}, &code).ok());  // attach never stops the job
}

TEST_CASE("options: record --max-size takes k/m/g suffixes, --force is off by default", "[cli]") {
  CHECK(parse_size("4096").value() == 4096);
  CHECK(parse_size("512k").value() == 512ull << 10);
  CHECK(parse_size("64M").value() == 64ull << 20);
  CHECK(parse_size("2g").value() == 2ull << 30);
  for (const char* bad : {"", "k", "12x", "1.5g", "-1", "5kb", "99999999999999999999"})
    CHECK_FALSE(parse_size(bad).ok());
  CHECK_FALSE(parse_size("17179869184g").ok());  // 2^34 GiB overflows 64 bits

  int code = -1;
  auto o = parse({"record", "-o", "x.cap", "--max-size", "300m", "--", "true"}, &code);
  REQUIRE(o.ok());
  CHECK(o->max_capture_bytes == 300ull << 20);
  CHECK_FALSE(o->force);
  o = parse({"record", "-o", "x.cap", "--force", "--all"}, &code);
  REQUIRE(o.ok());
  CHECK(o->force);
  CHECK(o->max_capture_bytes == 0);
  auto r = parse({"record", "-o", "x.cap", "--max-size", "0", "--all"}, &code);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "--max-size: must be more than 0");
  r = parse({"record", "-o", "x.cap", "--max-size", "12x", "--all"}, &code);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("--max-size: invalid size '12x'") == 0);
}
