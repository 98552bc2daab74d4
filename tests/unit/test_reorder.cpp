// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <algorithm>
#include <utility>
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

TEST_CASE("reorder: equal timestamps keep their arrival order, and any release pattern gives the stable-sort order",
          "[reorder]") {
  // A reference: what the reorderer promised before it became a heap (every
  // release stable-sorts what it holds and delivers the prefix up to the
  // cutoff), run side by side on one pseudo-random stream with bursts of
  // equal timestamps, late arrivals and releases after 1 to 7 records.
  struct Reference {
    uint64_t horizon, newest = 0, last = 0, late = 0;
    std::vector<std::pair<uint64_t, uint32_t>> held;  // (ts, tid)
    std::vector<std::pair<uint64_t, uint32_t>> out;
    void push(uint64_t ts, uint32_t tid) {
      newest = std::max(newest, ts);
      held.emplace_back(ts, tid);
    }
    void deliver(uint64_t cutoff) {
      std::stable_sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      size_t n = 0;
      for (; n < held.size() && held[n].first <= cutoff; ++n) {
        if (held[n].first < last) ++late;
        else last = held[n].first;
        out.push_back(held[n]);
      }
      held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n));
    }
    void release() {
      if (newest >= horizon) deliver(newest - horizon);
    }
  };
  Reorderer r(50);
  Reference ref{50};
  std::vector<std::pair<uint64_t, uint32_t>> out;
  auto sink = [&](const Event& e) { out.emplace_back(header_of(e).ts_ns, header_of(e).tid); };
  uint64_t x = 12345, ts = 1000;
  for (uint32_t i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t jump = (x >> 33) % 8;                       // 0: the same timestamp again
    ts += jump;
    uint64_t t = (x >> 40) % 17 == 0 ? ts - std::min<uint64_t>(ts, 80) : ts - (x >> 50) % 30;  // some late
    st_sched_wakeup w{};
    w.hdr.size = sizeof(w);
    w.hdr.kind = ST_EV_SCHED_WAKEUP;
    w.hdr.ts_ns = t;
    w.hdr.tid = i;  // arrival order
    r.push(Event{w});
    ref.push(t, i);
    if ((x >> 20) % 7 == 0) {
      r.release(sink);
      ref.release();
    }
  }
  r.flush(sink);
  ref.deliver(UINT64_MAX);
  CHECK(out.size() == 5000);
  CHECK(out == ref.out);
  CHECK(r.late() == ref.late);
  CHECK(r.late() > 0);
}
