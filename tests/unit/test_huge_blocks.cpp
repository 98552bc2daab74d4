// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cstdint>
#include <random>
#include <vector>
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

// Minor page faults of this thread so far.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

}  // namespace

TEST_CASE("grow vector: a huge block grows by moving its pages, not by copying them", "[timeline]") {
  TimelineVector<Span> v;
  size_t n = 0;
  auto fill_to_capacity = [&] {
    while (v.size() < v.capacity()) {
      Span s;
      s.start = n;
      s.bytes = n * 7;
      v.push_back(s);
      ++n;
    }
  };
  while (v.capacity() * sizeof(Span) < 8 * kHugeBlockFrom) {
    if (v.size() == v.capacity()) v.push_back(Span{.start = n, .bytes = n * 7}), ++n;
    fill_to_capacity();
  }
  const size_t before_bytes = v.capacity() * sizeof(Span);
  const long faults = minor_faults();
  v.push_back(Span{.start = n, .bytes = n * 7});  // the growth: 32 MiB or more moved
  ++n;
  const long grew_faults = minor_faults() - faults;
  CHECK(v.capacity() * sizeof(Span) >= 2 * before_bytes);
  // A copy would touch every page of the old block in the new one: 8192
  // faults with 4 KiB pages, 16 with huge pages. A move touches the page the
  // new entry lands on (and, under ASan, a page or two of its shadow: 3 seen).
  CHECK(grew_faults <= 6);
  CHECK(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes == 0);
  bool intact = v.size() == n;
  for (size_t i = 0; i < v.size(); ++i) intact = intact && v[i].start == i && v[i].bytes == i * 7;
  CHECK(intact);
}

TEST_CASE("grow vector: the same contents as std::vector through random edits, small and huge", "[timeline]") {
  std::mt19937_64 rng(19);
  TimelineVector<BlockIo> g;
  std::vector<BlockIo> s;
  auto same = [&] {
    if (g.size() != s.size()) return false;
    for (size_t i = 0; i < s.size(); ++i)
      if (g[i].start != s[i].start || g[i].bytes != s[i].bytes) return false;
    return true;
  };
  uint64_t next = 0;
  size_t peak_bytes = 0;
  for (int round = 0; round < 4000; ++round) {
    const auto op = rng() % 100;
    if (op < 80) {
      const size_t k = 1 + rng() % 2000;  // bursts: through 4 MiB (~170 k entries) and back
      for (size_t i = 0; i < k; ++i) {
        BlockIo b;
        b.start = next;
        b.bytes = static_cast<uint32_t>(next++);
        g.push_back(b);
        s.push_back(b);
      }
    } else if (op < 88 && !s.empty()) {
      const size_t k = rng() % (s.size() / 4 + 1);  // the front forgotten, as a fold does
      g.erase(g.begin(), g.begin() + k);
      s.erase(s.begin(), s.begin() + static_cast<long>(k));
    } else if (op < 92 && !s.empty()) {
      const size_t at = rng() % s.size();
      const size_t k = std::min<size_t>(s.size() - at, rng() % 50);
      g.insert(g.begin() + at, g.begin(), g.begin() + k);  // from itself
      const std::vector<BlockIo> head(s.begin(), s.begin() + static_cast<long>(k));
      s.insert(s.begin() + static_cast<long>(at), head.begin(), head.end());
    } else if (op < 95) {
      g.shrink_to_fit();
      CHECK(g.capacity() >= g.size());
    } else if (op < 97 && !s.empty()) {
      g.pop_back();
      s.pop_back();
    } else {
      TimelineVector<BlockIo> copy = g;
      TimelineVector<BlockIo> moved = std::move(copy);
      g.swap(moved);
    }
    peak_bytes = std::max(peak_bytes, g.capacity() * sizeof(BlockIo));
    if (!same()) {
      FAIL_CHECK("differs from std::vector after round " << round << " (op " << op << ")");
      break;
    }
  }
  CHECK(s.size() > 0);
  CHECK(peak_bytes > kHugeBlockFrom);  // grown as a huge block, not only into one
}

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
