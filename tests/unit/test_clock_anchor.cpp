// SPDX-License-Identifier: Apache-2.0
// Clock anchors (util/clock_anchor.h, pipeline/clock_notes.h): a tight
// (MONOTONIC, REALTIME) pair with its bound, wall-clock steps told apart
// from NTP's slew, the session-long summary, and the note that carries an
// anchor through a capture.
#include <catch2/catch.hpp>
#include <time.h>

#include <cstdlib>

#include "pipeline/analysis.h"
#include "pipeline/clock_notes.h"
#include "util/clock_anchor.h"

using namespace steptrace;

namespace {

int64_t now_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000ll + ts.tv_nsec;
}

// An anchor whose wall clock is `offset_ns` ahead of monotonic at `mono_ns`.
ClockAnchor at(uint64_t mono_ns, int64_t offset_ns, uint32_t bound_ns = 100) {
  return {mono_ns, static_cast<int64_t>(mono_ns) + offset_ns, bound_ns};
}

}  // namespace

TEST_CASE("clock: an anchor is a tight pair of this host's monotonic and wall clocks", "[clock]") {
  const int64_t mono0 = now_ns(CLOCK_MONOTONIC), real0 = now_ns(CLOCK_REALTIME);
  const ClockAnchor a = take_clock_anchor();
  const int64_t mono1 = now_ns(CLOCK_MONOTONIC), real1 = now_ns(CLOCK_REALTIME);
  REQUIRE(a.valid());
  CHECK(static_cast<int64_t>(a.mono_ns) >= mono0);
  CHECK(static_cast<int64_t>(a.mono_ns) <= mono1);
  CHECK(a.real_ns >= real0);
  CHECK(a.real_ns <= real1);
  CHECK(a.bound_ns >= 1);
  // Three clock reads through the vDSO: well under a millisecond unless
  // every one of ten tries was preempted.
  CHECK(a.bound_ns < 1'000'000);
  // The offset is the wall clock's distance from monotonic, as a second
  // pair read now gives it (within both brackets and the reads between).
  CHECK(std::llabs(a.offset_ns() - (real1 - mono1)) < 5'000'000);
}

TEST_CASE("clock: a wall-clock step is told apart from NTP's slew", "[clock]") {
  const uint64_t t = 1'000'000'000'000ull;
  const int64_t off = 1'700'000'000'000'000'000ll;
  WallClockStep s;
  // 10 s apart: 500 ppm allows 5 ms, plus both bounds.
  CHECK_FALSE(wall_clock_stepped(at(t, off), at(t + 10'000'000'000ull, off), &s));
  CHECK_FALSE(wall_clock_stepped(at(t, off), at(t + 10'000'000'000ull, off + 4'000'000), &s));
  CHECK_FALSE(wall_clock_stepped(at(t, off), at(t + 10'000'000'000ull, off - 5'000'100), &s));
  REQUIRE(wall_clock_stepped(at(t, off), at(t + 10'000'000'000ull, off - 5'000'300), &s));
  CHECK(s.step_ns == -5'000'300);
  CHECK(s.after_mono_ns == t);
  CHECK(s.before_mono_ns == t + 10'000'000'000ull);
  // An operator setting the clock 2 s ahead.
  REQUIRE(wall_clock_stepped(at(t, off), at(t + 1'000'000'000ull, off + 2'000'000'000ll), &s));
  CHECK(s.step_ns == 2'000'000'000ll);
  // A wide bound hides what it cannot tell.
  CHECK_FALSE(wall_clock_stepped(at(t, off, 3'000'000), at(t + 1'000'000'000ull, off + 5'000'000, 3'000'000), &s));
  // Out of order or invalid: no step.
  CHECK_FALSE(wall_clock_stepped(at(t + 1, off), at(t, off + 1'000'000'000ll), &s));
  CHECK_FALSE(wall_clock_stepped(ClockAnchor{}, at(t, off), &s));
}

TEST_CASE("clock: a session's anchors are summarised in bounded memory", "[clock]") {
  const uint64_t t = 5'000'000'000ull;
  const int64_t off = 1'700'000'000'000'000'000ll;
  ClockAnchors c;
  CHECK(c.count() == 0);
  CHECK(clock_line(c).empty());  // an older capture: no line
  CHECK(c.slew_ppm() == 0);
  // 20 s of slewing at +10 ppm, a step of -1.5 s, then 20 s more.
  for (int i = 0; i <= 2; ++i) c.add(at(t + i * 10'000'000'000ull, off + i * 100'000, 50 + i));
  c.add(at(t + 30'000'000'000ull, off + 300'000 - 1'500'000'000ll, 40));
  c.add(at(t + 40'000'000'000ull, off + 400'000 - 1'500'000'000ll, 60));
  c.add(at(t + 35'000'000'000ull, off));  // older than the last: not used
  CHECK(c.count() == 5);
  CHECK(c.out_of_order() == 1);
  CHECK(c.first().mono_ns == t);
  CHECK(c.last().mono_ns == t + 40'000'000'000ull);
  CHECK(c.tightest_bound_ns() == 40);
  CHECK(c.widest_bound_ns() == 60);
  REQUIRE(c.steps().size() == 1);
  CHECK(c.steps()[0].after_mono_ns == t + 20'000'000'000ull);
  CHECK(c.steps()[0].step_ns == -1'500'000'000ll + 100'000);
  CHECK(c.slew_ppm() == Approx(10.0).margin(0.01));
  CHECK(clock_line(c).find("STEPPED 1 time (first by -1499.900 ms)") != std::string::npos);
  // Steps past the cap are counted, not listed.
  ClockAnchors many;
  for (size_t i = 0; i < ClockAnchors::kMaxSteps + 5; ++i)
    many.add(at(t + i * 1'000'000'000ull, off + static_cast<int64_t>(i % 2) * 1'000'000'000ll));
  CHECK(many.steps().size() == ClockAnchors::kMaxSteps);
  CHECK(many.steps_over_cap() == 4);
  const auto j = clock_json(many);
  CHECK(j["anchors"] == ClockAnchors::kMaxSteps + 5);
  CHECK(j["wall_clock_steps_not_listed"] == 4);
}

TEST_CASE("clock: an anchor travels in a note, and a bad note is counted, not used", "[clock]") {
  const ClockAnchor a = at(123'456'789'000ull, 1'700'000'000'000'000'000ll, 77);
  auto back = anchor_in_note(clock_note(a));
  REQUIRE(back);
  CHECK(back->mono_ns == a.mono_ns);
  CHECK(back->real_ns == a.real_ns);
  CHECK(back->bound_ns == 77);
  CHECK_FALSE(anchor_in_note({{"note", "parent"}, {"ppid", 1}}));
  CHECK_FALSE(anchor_in_note({{"note", "clock"}, {"mono_ns", "1"}, {"real_ns", 2}, {"bound_ns", 3}}));
  CHECK_FALSE(anchor_in_note({{"note", "clock"}, {"mono_ns", 1}, {"real_ns", 2}}));
  CHECK_FALSE(anchor_in_note({{"note", "clock"}, {"mono_ns", 1}, {"real_ns", 2}, {"bound_ns", 1ull << 40}}));
  CHECK_FALSE(anchor_in_note({{"note", "clock"}, {"mono_ns", 0}, {"real_ns", 2}, {"bound_ns", 3}}));
  Analysis an;
  an.on_note(0, clock_note(a));
  an.on_note(0, {{"note", "clock"}, {"mono_ns", -5}, {"real_ns", 2}, {"bound_ns", 3}});
  CHECK(an.clock.count() == 1);
  CHECK(an.notes.malformed == 1);
  const auto j = clock_json(an.clock);
  CHECK(j["first"]["bound_ns"] == 77);
  CHECK(j["first"].find("note") == j["first"].end());
}

TEST_CASE("clock: an anchor carries what the kernel says of the wall clock's own error", "[clock]") {
  // adjtimex(2) always answers: a maximum error (16 s, its cap, when no NTP
  // daemon disciplines the clock) and whether the clock is synchronized.
  const ClockAnchor now = take_clock_anchor();
  CHECK(now.wall_max_error_us >= 0);
  CHECK(now.wall_max_error_us <= 16'000'000);
  ClockAnchor a = at(123'456'789'000ull, 1'700'000'000'000'000'000ll, 77);
  a.wall_max_error_us = 1500;
  auto back = anchor_in_note(clock_note(a));
  REQUIRE(back);
  CHECK(back->wall_max_error_us == 1500);
  CHECK_FALSE(back->wall_unsynced);
  ClockAnchor u = a;
  u.mono_ns += 10'000'000'000ull;
  u.real_ns += 10'000'000'000ll;
  u.wall_max_error_us = 2500;
  u.wall_unsynced = true;
  back = anchor_in_note(clock_note(u));
  REQUIRE(back);
  CHECK(back->wall_unsynced);
  // A note from before these fields: not stated.
  back = anchor_in_note({{"note", "clock"}, {"mono_ns", 1u}, {"real_ns", 2}, {"bound_ns", 3u}});
  REQUIRE(back);
  CHECK(back->wall_max_error_us == -1);
  CHECK_FALSE(back->wall_unsynced);
  ClockAnchors all;
  CHECK(all.worst_wall_error_us() == -1);
  all.add(a);
  all.add(u);
  CHECK(all.worst_wall_error_us() == 2500);
  CHECK(all.unsynced() == 1);
  CHECK(clock_json(all)["wall_max_error_us"] == 2500);
}
