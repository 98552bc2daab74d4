// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "timeline/timeline_store.h"

using namespace steptrace;

namespace {

// The smaps entry of the mapping that holds p: its "THPeligible:" value
// (-1 when the kernel does not report one).
int thp_eligible(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

bool thp_enabled() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(in, s);
  return !s.empty() && s.find("[never]") == std::string::npos;
}

st_accel_ioctl ioctl_at(uint64_t enter, uint64_t exit, uint32_t cmd) {
  st_accel_ioctl a{};
  a.hdr.size = sizeof(a);
  a.hdr.kind = ST_EV_ACCEL_IOCTL;
  a.hdr.pid = a.hdr.tid = 7;
  a.hdr.ts_ns = exit;
  a.enter_ts = enter;
  a.cmd = cmd;
  return a;
}

}  // namespace

TEST_CASE("huge blocks: a long timeline vector is 2 MiB-aligned, advised for THP, and keeps its contents",
          "[timeline]") {
  TimelineVector<Span> v;
  const size_t n = 300'000;  // 16.8 MB of spans: grows through both kinds of block
  for (size_t i = 0; i < n; ++i) {
    Span s;
    s.start = i;
    s.end = i + 1;
    s.bytes = i * 3;
    v.push_back(s);
  }
  REQUIRE(v.capacity() * sizeof(Span) >= kHugeBlockFrom);
  CHECK(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes == 0);
  bool intact = true;
  for (size_t i = 0; i < n; ++i) intact = intact && v[i].start == i && v[i].bytes == i * 3;
  CHECK(intact);
  if (thp_enabled()) CHECK(thp_eligible(v.data()) == 1);

  // A copy (a fold's window) and a small vector: the same contents, freed without complaint.
  TimelineVector<Span> copy = v;
  CHECK(copy.size() == n);
  CHECK(copy.back().bytes == (n - 1) * 3);
  TimelineVector<Span> small(10);
  CHECK(small.size() == 10);
  v.clear();
  v.shrink_to_fit();
  CHECK(v.capacity() == 0);
}

TEST_CASE("timeline: spans in start order after finish, nested or not", "[timeline]") {
  TimelineStore tl;
  // In order: the sort is skipped and the order stays.
  tl.on_event(Event{ioctl_at(100, 200, 1)});
  tl.on_event(Event{ioctl_at(300, 400, 2)});
  // A call that began before both and ended after them (an outer span).
  tl.on_event(Event{ioctl_at(50, 500, 3)});
  tl.on_event(Event{ioctl_at(600, 700, 4)});
  tl.finish(1000);
  const ThreadTimeline* t = tl.find(7);
  REQUIRE(t);
  REQUIRE(t->spans.size() == 4);
  CHECK(t->spans[0].cmd == 3);
  CHECK(t->spans[1].cmd == 1);
  CHECK(t->spans[2].cmd == 2);
  CHECK(t->spans[3].cmd == 4);
  CHECK(t->max_span_ns == 450);
}
