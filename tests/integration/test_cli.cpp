// SPDX-License-Identifier: Apache-2.0
// The steptrace binary end to end: exit codes, clear one-line errors, JSON.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "support/shell.h"

namespace {

using steptrace::test::sh;

const std::string kBin = STEPTRACE_BIN;

}  // namespace

TEST_CASE("cli: bad input gets a clear error and a non-zero exit", "[cli]") {
  auto r = sh(kBin + " attach");
  CHECK(r.rc != 0);
  CHECK(r.out.find("exactly one of") != std::string::npos);
  r = sh(kBin + " attach -p 12,abc");
  CHECK(r.rc != 0);
  CHECK(r.out.find("invalid pid 'abc'") != std::string::npos);
  r = sh(kBin + " run --collectors sched,gpu -- true");
  CHECK(r.rc != 0);
  CHECK(r.out.find("unknown collector 'gpu'") != std::string::npos);
  r = sh(kBin + " frobnicate");
  CHECK(r.rc == 2);  // usage errors exit 2
  r = sh(kBin + " run --ring-mib 3000 -- true");
  CHECK(r.rc == 2);
  r = sh(kBin + " daemon --no-such-flag");
  CHECK(r.rc == 2);
  r = sh(kBin + " --help");
  CHECK(r.rc == 0);
  CHECK(r.out.find("run") != std::string::npos);
  CHECK(r.out.find("steptrace daemon") != std::string::npos);
  r = sh(kBin + " --version");
  CHECK(r.rc == 0);
  CHECK(r.out == std::string("steptrace ") + STEPTRACE_VERSION + "\n");
}

TEST_CASE("cli: attach to a pid that does not exist fails with one line", "[root][cli]") {
  auto r = sh(kBin + " attach -p 999999999 -d 1");
  CHECK(r.rc == 1);
  CHECK(r.out == "steptrace: error: no such process: 999999999\n");
}

TEST_CASE("cli: an --accel-dev that cannot exist is rejected", "[root][cli]") {
  auto r = sh(kBin + " run --accel-dev /nonexistent-dir/neuron0 -- true");
  CHECK(r.rc == 1);
  CHECK(r.out.find("unknown --accel-dev /nonexistent-dir/neuron0") != std::string::npos);
}

TEST_CASE("cli: run traces the job, passes its exit code through and writes JSON", "[root][cli]") {
  auto r = sh(kBin + " run --json - -- sh -c 'sleep 0.05; exit 3'");
  CHECK(r.rc == 3);
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["schema"] == "steptrace.summary/1");
  CHECK(j["job_exit_code"] == 3);
  CHECK(j["incomplete"] == false);
  CHECK(j["events"]["sched_switch"]["emitted"].get<uint64_t>() > 0);
  bool saw_sleep = false;
  for (const auto& t : j["threads"])
    if (t["comm"] == "sleep" && t["sleeping_ns"].get<uint64_t>() >= 40'000'000ull) saw_sleep = true;
  CHECK(saw_sleep);
}

TEST_CASE("cli: check prints the preflight table and succeeds as root", "[root][cli]") {
  auto r = sh(kBin + " check");
  CHECK(r.rc == 0);
  CHECK(r.out.find("privileges") != std::string::npos);
  CHECK(r.out.find("tracing can work here") != std::string::npos);
}
