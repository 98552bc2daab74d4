// SPDX-License-Identifier: Apache-2.0
// The steptrace binary end to end: exit codes, clear one-line errors, JSON.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "support/shell.h"

namespace {

using steptrace::test::sh;
using steptrace::test::slurp;

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

// stdout is the JSON alone: the job's own stdout goes to stderr, the banner and
// "wrote" lines too; --job-output keeps the job's output in a file instead.
TEST_CASE("cli: run --json - keeps the job's output and steptrace's messages out of stdout", "[root][cli]") {
  char tmpl[] = "/tmp/st-cli.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  // In a subshell: sh() adds 2>&1 to the command it is given.
  auto r = sh("(" + kBin + " run --collectors sched --json - -- sh -c 'echo JOB-SAYS-HELLO; echo JOB-ERR >&2' 2>" +
              dir + "/err)");
  INFO(r.out);
  CHECK(r.rc == 0);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  CHECK(j.is_object());  // nothing but the JSON
  const std::string err = slurp(dir + "/err");
  CHECK(err.find("JOB-SAYS-HELLO") != std::string::npos);
  CHECK(err.find("steptrace: Tracing the job") != std::string::npos);
  auto f = sh(kBin + " run --collectors sched --job-output " + dir + "/job.log --perfetto " + dir +
              "/t.json -- sh -c 'echo JOB-SAYS-HELLO; echo JOB-ERR >&2' 2>&1");
  CHECK(f.rc == 0);
  CHECK(f.out.find("JOB-SAYS-HELLO") == std::string::npos);
  CHECK(f.out.find("steptrace: wrote " + dir + "/t.json (") != std::string::npos);
  const std::string log = slurp(dir + "/job.log");
  CHECK(log.find("JOB-SAYS-HELLO") != std::string::npos);
  CHECK(log.find("JOB-ERR") != std::string::npos);
  sh("rm -rf " + dir);
}

TEST_CASE("cli: check prints the preflight table and succeeds as root", "[root][cli]") {
  auto r = sh(kBin + " check");
  CHECK(r.rc == 0);
  CHECK(r.out.find("privileges") != std::string::npos);
  CHECK(r.out.find("tracing can work here") != std::string::npos);
}
