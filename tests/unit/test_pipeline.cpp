// SPDX-License-Identifier: Apache-2.0
// The Pipeline (pipeline/pipeline.h) on hand-built records: ordering, the
// raw-record observer, windows, and counters that survive a restart.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "pipeline/pipeline.h"
#include "signals/signals_data.h"

using namespace steptrace;

namespace {

std::vector<uint8_t> comm_record(uint32_t tid, uint64_t ts_ns, const char* comm) {
  st_task_comm c{};
  c.hdr.size = sizeof(c);
  c.hdr.kind = ST_EV_TASK_COMM;
  c.hdr.ts_ns = ts_ns;
  c.hdr.pid = c.hdr.tid = tid;
  std::strncpy(c.comm, comm, sizeof(c.comm) - 1);
  std::vector<uint8_t> b(sizeof(c));
  std::memcpy(b.data(), &c, sizeof(c));
  return b;
}

void push(Pipeline& p, const std::vector<uint8_t>& b) { p.push(b.data(), b.size()); }

std::string comm_of(const Pipeline& p, uint32_t tid) {
  const ThreadInfo* t = p.analysis().threads.find(tid);
  return t ? t->comm : "";
}

constexpr uint64_t kMs = 1'000'000;

}  // namespace

TEST_CASE("pipeline: events reach the analysis in time order, held back until the horizon passes", "[pipeline]") {
  Pipeline p;
  push(p, comm_record(1, 20 * kMs, "late-ts"));
  push(p, comm_record(2, 10 * kMs, "early-ts"));
  p.advance();
  // Newest is 20 ms: what is at least 5 ms older (the 10 ms record) is delivered, the 20 ms one is held.
  CHECK(comm_of(p, 2) == "early-ts");
  CHECK(comm_of(p, 1).empty());
  // A record older than one already delivered arrives too late: counted, still delivered.
  push(p, comm_record(3, 5 * kMs, "too-late"));
  p.flush();
  CHECK(comm_of(p, 1) == "late-ts");
  CHECK(comm_of(p, 3) == "too-late");
  CHECK(p.late() == 1);
  CHECK(p.records() == 3);
  CHECK(p.newest_ts() == 20 * kMs);
}

TEST_CASE("pipeline: the observer sees every record with a header, decodable or not", "[pipeline]") {
  Pipeline p;
  std::vector<uint32_t> kinds;
  p.set_observer([&](const st_event_header& h, const void*, size_t) { kinds.push_back(h.kind); });
  push(p, comm_record(1, kMs, "a"));
  st_event_header unknown{};
  unknown.size = sizeof(unknown);
  unknown.kind = 200;
  p.push(&unknown, sizeof(unknown));
  p.push(&unknown, 3);  // shorter than a header: counted, not observed
  REQUIRE(kinds.size() == 2);
  CHECK(kinds[0] == ST_EV_TASK_COMM);
  CHECK(kinds[1] == 200);
  CHECK(p.records() == 3);
  CHECK(p.decode_stats().unknown_kind == 1);
  CHECK(p.decode_stats().bad_size == 1);
}

TEST_CASE("pipeline: close_window starts an empty window, held-back events go to the next one", "[pipeline]") {
  Pipeline p;
  signals::SignalsData sd;
  p.analysis().device_signals = &sd;
  push(p, comm_record(1, 1 * kMs, "first"));
  push(p, comm_record(2, 10 * kMs, "second"));
  p.advance();  // delivers tid 1 (10 - 5 >= 1); tid 2 is held back for ordering
  CHECK(p.window_records() == 2);
  DropStats none{};
  (void)p.close_window(11 * kMs, none);
  CHECK(p.window_records() == 0);
  CHECK(p.analysis().threads.find(1) == nullptr);  // the closed window's threads are forgotten
  CHECK(p.analysis().device_signals == &sd);       // the signal source carries over
  p.flush();
  CHECK(comm_of(p, 2) == "second");
  CHECK(p.records() == 2);  // cumulative
}

TEST_CASE("pipeline: restart (a new tracer) keeps records, late and decode counters cumulative", "[pipeline]") {
  Pipeline p;
  push(p, comm_record(1, 20 * kMs, "a"));
  p.advance();
  p.flush();
  push(p, comm_record(2, 1 * kMs, "late"));
  p.flush();
  REQUIRE(p.late() == 1);
  p.restart();
  // A new ring starts its own timestamps: nothing of the old order applies.
  push(p, comm_record(3, 2 * kMs, "b"));
  p.flush();
  CHECK(p.late() == 1);
  CHECK(p.records() == 3);
  CHECK(p.decode_stats().decoded[ST_EV_TASK_COMM] == 3);
  CHECK(comm_of(p, 3) == "b");
}
