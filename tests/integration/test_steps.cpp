// SPDX-License-Identifier: Apache-2.0
// [root] Step reconstruction from the explicit marker, and the runtime
// library discovery that lets `run` probe before the job's first call.
#include <catch2/catch.hpp>

#include "session/session.h"
#include "support/workload.h"

using namespace steptrace;

TEST_CASE("steps: the step marker cuts exact steps, time splits into on-CPU and sleep", "[root][steps]") {
  test::require_root();
  Options o;
  o.command = CommandKind::run;
  o.subsystems = *parse_subsystems("all");
  constexpr int kSteps = 12;
  o.argv = {MARKER_DEMO, std::to_string(kSteps), "20", "10"};  // 20 ms sleep + 10 ms spin per step
  auto s = Session::start(o);
  REQUIRE(s.ok());
  REQUIRE((*s)->run_loop(nullptr).ok());
  auto r = (*s)->finish();
  REQUIRE(r.ok());
  CHECK(r->job_exit_code == 0);
  REQUIRE(r->job.ranks.size() == 1);
  const auto& rank = r->job.ranks[0];
  CHECK(rank.source == StepSource::marker);
  REQUIRE(rank.steps.size() == kSteps);  // the first call is not missed, the closing call opens no step
  for (const auto& st : rank.steps) {
    if (st.index == 0) continue;
    double dur = static_cast<double>(st.duration()) / 1e6;
    CHECK(dur > 29.0);
    CHECK(dur < 60.0);
    // 20 ms asleep shows as other (no known waker), 10 ms spinning as host overhead or contention.
    double other = static_cast<double>(st.ns[static_cast<size_t>(Category::other)]) / 1e6;
    double cpu = static_cast<double>(st.ns[static_cast<size_t>(Category::host_overhead)] +
                                     st.ns[static_cast<size_t>(Category::cpu_contention)]) / 1e6;
    CHECK(other == Approx(20.0).margin(3.0));
    CHECK(cpu == Approx(10.0).margin(4.0));
  }
}

TEST_CASE("steps: a dynamically linked job's marker library is resolved before it runs", "[steps]") {
  auto libs = resolve_needed_libs(MARKER_DEMO);
  REQUIRE(libs.size() == 1);
  CHECK(libs[0].find("libsteptrace_marker.so") != std::string::npos);
  CHECK(resolve_needed_libs("/bin/sh").empty());              // no libnrt/marker
  CHECK(resolve_needed_libs("/nonexistent/program").empty());
}

TEST_CASE("steps: runtime libraries are found in /proc/PID/maps text", "[steps]") {
  std::string maps =
      "7f0000-7f1000 r-xp 00000000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n"
      "7f1000-7f2000 r--p 00001000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n"
      "7f2000-7f3000 r-xp 00000000 fd:01 124 /usr/lib/libsteptrace_marker.so\n"
      "7f3000-7f4000 r-xp 00000000 fd:01 125 /usr/lib/libnrtx.so (deleted)\n"
      "7f4000-7f5000 r-xp 00000000 fd:01 126 /usr/lib/libc.so.6\n"
      "7f5000-7f6000 rw-p 00000000 00:00 0 [heap]\n";
  auto libs = find_probe_libs(maps);
  REQUIRE(libs.size() == 2);
  CHECK(libs[0] == "/opt/aws/neuron/lib/libnrt.so.1");
  CHECK(libs[1] == "/usr/lib/libsteptrace_marker.so");
}
