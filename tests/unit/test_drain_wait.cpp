// SPDX-License-Identifier: Apache-2.0
// The sleep between ring drains (loader/drain_wait.h): the drain interval
// while records come, the idle interval after empty drains, and the early
// ends: a forced wake-up on the ring (an eventfd stands in for the ring map
// here; the BPF side is covered by the root tests), a named file appearing,
// the -d deadline. Bounds are far from the expected times: a loaded CI
// machine delays a wake-up by milliseconds, never by the idle interval.
#include <catch2/catch.hpp>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "loader/drain_wait.h"
#include "util/mono_clock.h"

using namespace steptrace;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

TEST_CASE("drain wait: idle only after empty drains, and a forced wake-up ends the idle sleep", "[loader]") {
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  REQUIRE(efd >= 0);
  auto w = DrainWait::create(efd, 10, 2000, 0);
  REQUIRE(w.ok());
  auto& d = **w;
  // Records keep the drain interval; empty drains lead to the idle one.
  CHECK_FALSE(d.next_is_idle(5));
  CHECK_FALSE(d.next_is_idle(0));
  CHECK_FALSE(d.next_is_idle(0));
  CHECK(d.next_is_idle(0));
  CHECK_FALSE(d.next_is_idle(1));  // one record: back on the timer
  CHECK_FALSE(d.next_is_idle(0));
  CHECK_FALSE(d.next_is_idle(0));
  REQUIRE(d.next_is_idle(0));
  // The producer's wake-up, 50 ms into a 2 s idle sleep.
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    uint64_t one = 1;
    CHECK(write(efd, &one, sizeof(one)) == sizeof(one));
  });
  auto t0 = Clock::now();
  d.sleep(0);
  const double woke = ms_since(t0);
  producer.join();
  CHECK(woke >= 40);
  CHECK(woke < 1500);
  CHECK(d.idle_sleeps() == 1);
  CHECK_FALSE(d.next_is_idle(3));
  // The ring stays readable (records still there, edge-triggered): the next
  // sleep is the plain drain interval, not cut short by what is merely there.
  t0 = Clock::now();
  d.sleep(0);
  CHECK(ms_since(t0) >= 8);
  close(efd);
}

// The daemon's slow_drain level lengthens the interval of a wait it already has.
TEST_CASE("drain wait: a new drain interval holds from the next sleep, and the idle one stays at least as long",
          "[loader]") {
  auto w = DrainWait::create(-1, 10, 200, 0);
  REQUIRE(w.ok());
  auto& d = **w;
  d.set_drain_ms(300);
  CHECK(d.idle_ms() == 300);
  CHECK_FALSE(d.next_is_idle(1));
  auto t0 = Clock::now();
  d.sleep(0);
  CHECK(ms_since(t0) >= 250);
  d.set_drain_ms(0);  // at least 1 ms: never a busy loop
  t0 = Clock::now();
  d.sleep(0);
  CHECK(ms_since(t0) < 250);
  CHECK(d.idle_ms() == 300);
}

TEST_CASE("drain wait: empty drains within the first second of quiet keep the drain interval", "[loader]") {
  auto w = DrainWait::create(-1, 10, 2000, 60'000);
  REQUIRE(w.ok());
  CHECK_FALSE((*w)->next_is_idle(1));
  for (int i = 0; i < 10; ++i) CHECK_FALSE((*w)->next_is_idle(0));
}

TEST_CASE("drain wait: an idle sleep ends at the deadline and when a watched file appears", "[loader]") {
  auto w = DrainWait::create(-1, 10, 3000, 0);
  REQUIRE(w.ok());
  auto& d = **w;
  for (int i = 0; i < 3; ++i) d.next_is_idle(0);
  auto t0 = Clock::now();
  d.sleep(monotonic_ns() + 60'000'000ull);
  double took = ms_since(t0);
  CHECK(took >= 50);
  CHECK(took < 2000);

  char tmpl[] = "/tmp/st-drain-wait.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl, dev = dir + "/neuron0";
  d.watch_paths({dev});
  for (int i = 0; i < 3; ++i) d.next_is_idle(0);
  std::thread creator([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ofstream(dev) << "x";
  });
  t0 = Clock::now();
  d.sleep(0);
  took = ms_since(t0);
  creator.join();
  CHECK(took >= 40);
  CHECK(took < 2000);
  d.watch_paths({});
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
