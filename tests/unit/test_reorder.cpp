// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <vector>

#include "capture/reorder.h"

using namespace steptrace;

namespace {
Event at(uint64_t ts) {
  st_sched_wakeup w{};
  w.hdr.size = sizeof(w);
  w.hdr.kind = ST_EV_SCHED_WAKEUP;
  w.hdr.ts_ns = ts;
  return Event{w};
}
}  // namespace

TEST_CASE("reorder: events come out in timestamp order once past the horizon", "[reorder]") {
  Reorderer r(100);
  std::vector<uint64_t> out;
  auto sink = [&](const Event& e) { out.push_back(header_of(e).ts_ns); };
  for (uint64_t ts : {1000, 990, 1010, 1200}) r.push(at(ts));
  r.release(sink);  // newest 1200 -> releases <= 1100
  CHECK(out == std::vector<uint64_t>{990, 1000, 1010});
  CHECK(r.pending() == 1);
  r.push(at(1150));
  r.flush(sink);
  CHECK(out == std::vector<uint64_t>{990, 1000, 1010, 1150, 1200});
  CHECK(r.late() == 0);
}

TEST_CASE("reorder: an event older than the horizon is delivered and counted late", "[reorder]") {
  Reorderer r(10);
  std::vector<uint64_t> out;
  auto sink = [&](const Event& e) { out.push_back(header_of(e).ts_ns); };
  r.push(at(100));
  r.push(at(200));
  r.release(sink);
  r.push(at(50));
  r.flush(sink);
  CHECK(out.size() == 3);
  CHECK(r.late() == 1);
}
