// SPDX-License-Identifier: Apache-2.0
// Hosts' clocks from the bytes they exchanged (multinode/stream_match.h) and
// the bounded marks they are fitted on (timeline/stream_marks.h): messages
// with known send and receive times, one host's wall clock planted off by
// milliseconds and drifting, the fit must land within its own stated bound.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "multinode/stream_match.h"
#include "timeline/collector_stats.h"
#include "timeline/stream_marks.h"
#include "timeline/timeline_store.h"

using namespace steptrace;

namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'000 * kMs;  // true time of the first message

// Host A's wall clock is true time; host B's reads `wall_error_ns` +
// `residual_ppm` * (t - kT0) ahead of it. Each host's monotonic clock is its
// job time less its own offset.
struct Plan {
  int64_t wall_error_ns = 3 * kMs;
  double residual_ppm = 7;
  int messages = 4000;       // each way, one every 2.5 ms
  uint32_t a_seq0 = 1000, b_seq0 = 0xffffffffu - 150'000;  // B -> A wraps
  bool b_to_a = true;
  int64_t b_recording_starts = 0;  // B's marks before this true time are not kept (its recording began later)
};

constexpr int64_t kOffsetA = 5'000'000 * kMs, kOffsetB = 9'000'000 * kMs;

int64_t b_error(const Plan& p, int64_t t) {
  return p.wall_error_ns + static_cast<int64_t>(static_cast<double>(t - kT0) * p.residual_ppm * 1e-6);
}
uint64_t mono_a(int64_t t) { return static_cast<uint64_t>(t - kOffsetA); }
uint64_t mono_b(const Plan& p, int64_t t) { return static_cast<uint64_t>(t + b_error(p, t) - kOffsetB); }

HostAlignment anchored(int64_t offset) {
  HostAlignment c;
  c.method = AlignmentMethod::anchors;
  c.offset_ns = offset;
  c.reading_bound_ns = 40;
  c.anchors = 3;
  return c;
}

const uint8_t kAddrA[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
const uint8_t kAddrB[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};

// Messages of 3000 bytes each way; the sender's call lasts 5 us, the bytes
// take 20-80 us to arrive, the receiver wakes 3-30 us later.
void exchange(const Plan& p, std::vector<StreamMark>& a, std::vector<StreamMark>& b) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> transit(20 * kUs, 80 * kUs), wake(3 * kUs, 30 * kUs);
  const uint64_t ab = stream_flow_id(kAddrA, 40000, kAddrB, 29500), ba = stream_flow_id(kAddrB, 29500, kAddrA, 40000);
  uint32_t a_seq = p.a_seq0, b_seq = p.b_seq0;
  for (int i = 0; i < p.messages; ++i) {
    const int64_t t = kT0 + i * 2500 * kUs;
    // A -> B
    a_seq += 3000;
    a.push_back({ab, mono_a(t), mono_a(t + 5 * kUs), a_seq, 3000, true});
    const int64_t arrive = t + 5 * kUs + transit(rng), read = arrive + wake(rng);
    if (read >= p.b_recording_starts) b.push_back({ab, mono_b(p, read - 2 * kUs), mono_b(p, read), a_seq, 3000, false});
    if (!p.b_to_a) continue;
    // B -> A, 1 ms later, read by A in two calls of 1500 bytes
    const int64_t u = t + kMs;
    b_seq += 3000;
    if (u >= p.b_recording_starts) b.push_back({ba, mono_b(p, u), mono_b(p, u + 5 * kUs), b_seq, 3000, true});
    const int64_t arrive2 = u + 5 * kUs + transit(rng), read2 = arrive2 + wake(rng);
    a.push_back({ba, mono_a(read2 - kUs), mono_a(read2), b_seq - 1500, 1500, false});
    a.push_back({ba, mono_a(read2 + 2 * kUs), mono_a(read2 + 3 * kUs), b_seq, 1500, false});
  }
}

// B's fitted job time against the truth, worst over the run.
int64_t worst_error(const Plan& p, const HostAlignment& b) {
  int64_t worst = 0;
  for (int64_t t = kT0; t <= kT0 + p.messages * 2500 * kUs; t += 100 * kMs)
    worst = std::max<int64_t>(worst, std::llabs(b.to_job_ns(mono_b(p, t)) - t));
  return worst;
}

HostAlignment with_fit(HostAlignment c, const StreamFit& f) {
  c.method = AlignmentMethod::network;
  c.net_peer = 0;
  c.net_offset_ns = f.offset_ns;
  c.net_origin_ns = f.origin_ns;
  c.net_drift_ppm = f.drift_ppm;
  c.net_bound_ns = f.bound_ns;
  return c;
}

}  // namespace

TEST_CASE("stream match: a wall clock 3 ms off and 7 ppm fast is fitted within its stated bound", "[multinode]") {
  Plan p;
  std::vector<StreamMark> a, b;
  exchange(p, a, b);
  const HostAlignment ca = anchored(kOffsetA), cb = anchored(kOffsetB);
  // By the anchors alone, B is off by the planted error.
  CHECK(std::llabs(cb.to_job_ns(mono_b(p, kT0)) - kT0 - p.wall_error_ns) < kUs);
  const StreamFit f = fit_stream_offset(b, cb, a, ca);
  INFO(f.why_not);
  REQUIRE(f.ok);
  CHECK(f.flows == 2);
  CHECK(f.lower == static_cast<size_t>(p.messages));
  CHECK(f.upper == static_cast<size_t>(2 * p.messages));  // A reads each message in two calls
  // The band is the tightest exchange each way: ~(20+3) us + ~(20+3) us wide.
  CHECK(f.bound_ns <= 40 * kUs);
  CHECK(f.bound_ns >= 15 * kUs);
  CHECK(std::fabs(f.drift_ppm + p.residual_ppm) < 0.5);
  const int64_t err = worst_error(p, with_fit(cb, f));
  INFO("worst " << err << " ns, bound " << f.bound_ns);
  CHECK(err <= static_cast<int64_t>(f.bound_ns));
}

TEST_CASE("stream match: bytes one way only bound one side and are not fitted", "[multinode]") {
  Plan p;
  p.b_to_a = false;
  std::vector<StreamMark> a, b;
  exchange(p, a, b);
  const StreamFit f = fit_stream_offset(b, anchored(kOffsetB), a, anchored(kOffsetA));
  CHECK_FALSE(f.ok);
  CHECK(f.lower == static_cast<size_t>(p.messages));
  CHECK(f.upper == 0);
  CHECK(f.why_not.find("one way") != std::string::npos);
  // Streams the other host never saw: nothing in common.
  std::vector<StreamMark> other = a;
  for (auto& m : other) m.flow ^= 1;
  const StreamFit g = fit_stream_offset(b, anchored(kOffsetB), other, anchored(kOffsetA));
  CHECK_FALSE(g.ok);
  CHECK(g.why_not == "no byte stream seen on both hosts");
}

TEST_CASE("stream match: a receiver whose recording began after the sequence wrapped still pairs the bytes",
          "[multinode]") {
  Plan p;
  p.b_seq0 = 0xffffffffu - 3000u * 100u;  // B -> A wraps after 100 messages
  p.a_seq0 = 0xffffffffu - 3000u * 300u;  // A -> B after 300
  p.b_recording_starts = kT0 + 400 * 2500 * kUs;  // B's capture starts after both wraps
  std::vector<StreamMark> a, b;
  exchange(p, a, b);
  const StreamFit f = fit_stream_offset(b, anchored(kOffsetB), a, anchored(kOffsetA));
  INFO(f.why_not);
  REQUIRE(f.ok);
  CHECK(f.lower == static_cast<size_t>(p.messages - 400));
  CHECK(worst_error(p, with_fit(anchored(kOffsetB), f)) <= static_cast<int64_t>(f.bound_ns));
}

// The rule both hosts thin by (timeline/stream_marks.cpp), restated: a
// mark is kept when its first byte's position hashes into one stride-th.
bool kept_by(uint32_t stride, const StreamMark& m) {
  uint32_t x = m.seq_end - m.bytes;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return (x & (stride - 1)) == 0;
}

TEST_CASE("stream marks: past the cap they thin to the calls whose first byte hashes into a stride, the same on both "
          "ends",
          "[multinode]") {
  StreamMarks sender(64), receiver(64);
  const uint64_t flow = stream_flow_id(kAddrA, 1, kAddrB, 2);
  uint32_t seq = 0xffffffffu - 20'000;  // wraps on the way
  for (uint64_t i = 0; i < 2000; ++i) {
    seq += 100;
    sender.add({flow, i * 10, i * 10 + 1, seq, 100, true});
  }
  seq = 0xffffffffu - 20'000;
  for (uint64_t i = 0; i < 1000; ++i) {  // read 200 bytes at a time
    seq += 200;
    receiver.add({flow, i * 20 + 5, i * 20 + 6, seq, 200, false});
  }
  CHECK(sender.seen() == 2000);
  CHECK(sender.marks().size() < 64);
  CHECK(sender.marks().size() >= 16);  // halved at each doubling, not emptied
  CHECK(sender.stride() > 1);
  CHECK(receiver.stride() > 1);
  for (const auto* m : {&sender, &receiver})
    for (const auto& k : m->marks()) CHECK(kept_by(m->stride(), k));
  // A receive kept, that the sender's stride keeps too, starts where a send
  // kept starts: the two ends keep the same bytes.
  const uint32_t both = std::max(sender.stride(), receiver.stride());
  size_t checked = 0;
  for (const auto& r : receiver.marks()) {
    if (!kept_by(both, r)) continue;
    ++checked;
    bool found = false;
    for (const auto& s : sender.marks()) found = found || s.seq_end - s.bytes == r.seq_end - r.bytes;
    CHECK(found);
  }
  CHECK(checked > 0);
}

TEST_CASE("stream marks: thinned past the cap, small quick messages beside large transfers still bound the clocks",
          "[multinode]") {
  // Each way, every 2.5 ms: a 64-byte message (a 5 us send, 20-80 us on the
  // wire, read 3-30 us later) and a 256 KiB transfer (one 2 ms send, read in
  // four 64 KiB calls as it arrives). Only the small messages bound the
  // clocks tightly; thinned to a sixth of the marks, they must still.
  Plan p;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> transit(20 * kUs, 80 * kUs), wake(3 * kUs, 30 * kUs);
  const uint64_t ab = stream_flow_id(kAddrA, 40000, kAddrB, 29500), ba = stream_flow_id(kAddrB, 29500, kAddrA, 40000);
  std::vector<StreamMark> a, b;
  uint32_t a_seq = 5000, b_seq = 0xffffffffu - 50'000'000u;
  constexpr uint32_t kBig = 256 * 1024, kRead = 64 * 1024;
  auto send = [&](bool a_to_b, int64_t t) {
    auto& from = a_to_b ? a : b;
    auto& to = a_to_b ? b : a;
    const uint64_t flow = a_to_b ? ab : ba;
    uint32_t& seq = a_to_b ? a_seq : b_seq;
    auto mono_from = [&](int64_t x) { return a_to_b ? mono_a(x) : mono_b(p, x); };
    auto mono_to = [&](int64_t x) { return a_to_b ? mono_b(p, x) : mono_a(x); };
    seq += 64;
    from.push_back({flow, mono_from(t), mono_from(t + 5 * kUs), seq, 64, true});
    const int64_t read = t + 5 * kUs + transit(rng) + wake(rng);
    to.push_back({flow, mono_to(read - kUs), mono_to(read), seq, 64, false});
    const int64_t u = t + 100 * kUs;
    seq += kBig;
    from.push_back({flow, mono_from(u), mono_from(u + 2 * kMs), seq, kBig, true});
    for (uint32_t k = 1; k <= kBig / kRead; ++k) {
      const int64_t r = u + static_cast<int64_t>(k) * 500 * kUs + transit(rng) + wake(rng);
      to.push_back({flow, mono_to(r - 10 * kUs), mono_to(r), seq - kBig + k * kRead, kRead, false});
    }
  };
  for (int i = 0; i < p.messages; ++i) {
    send(true, kT0 + i * 2500 * kUs);
    send(false, kT0 + i * 2500 * kUs + kMs);
  }
  const StreamFit all = fit_stream_offset(b, anchored(kOffsetB), a, anchored(kOffsetA));
  REQUIRE(all.ok);
  StreamMarks ta(a.size() / 6), tb(b.size() / 6);
  for (const auto& m : a) ta.add(m);
  for (const auto& m : b) tb.add(m);
  REQUIRE(ta.stride() > 1);
  REQUIRE(tb.stride() > 1);
  const StreamFit thinned = fit_stream_offset(tb.marks(), anchored(kOffsetB), ta.marks(), anchored(kOffsetA));
  INFO("every mark: +-" << all.bound_ns << " ns; thinned (strides " << ta.stride() << ", " << tb.stride()
                        << "): +-" << thinned.bound_ns << " ns, " << thinned.why_not);
  REQUIRE(thinned.ok);
  CHECK(all.bound_ns <= 60 * kUs);
  CHECK(thinned.bound_ns <= 2 * all.bound_ns);
  CHECK(worst_error(p, with_fit(anchored(kOffsetB), thinned)) <= static_cast<int64_t>(thinned.bound_ns));
}

TEST_CASE("stream match: three hosts in a line are fitted through the middle one, bounds adding up", "[multinode]") {
  // Host 0 and host 2 both exchange with host 1 only. Host 1's wall clock is
  // 3 ms ahead of the truth and 7 ppm fast, host 2's 1 ms ahead.
  Plan p01;
  std::vector<StreamMark> m0, m1, m1b, m2;
  exchange(p01, m0, m1);
  Plan p12;
  p12.wall_error_ns = kMs;
  p12.residual_ppm = 0;
  p12.a_seq0 = 77;
  p12.b_seq0 = 99;
  exchange(p12, m1b, m2);  // its "A" is host 1 (times moved onto host 1's clock below), its "B" host 2
  for (auto& m : m1b) {
    const int64_t t_start = static_cast<int64_t>(m.start) + kOffsetA, t_end = static_cast<int64_t>(m.end) + kOffsetA;
    m.start = mono_b(p01, t_start);
    m.end = mono_b(p01, t_end);
    m.flow ^= 0x5555;  // other connections
  }
  for (auto& m : m2) m.flow ^= 0x5555;
  m1.insert(m1.end(), m1b.begin(), m1b.end());
  StreamMarks s0, s1, s2;
  for (auto* s : {&s0, &s1, &s2}) s->enable();
  for (const auto& m : m0) s0.add(m);
  for (const auto& m : m1) s1.add(m);
  for (const auto& m : m2) s2.add(m);
  std::vector<HostAlignment> clocks{anchored(kOffsetA), anchored(kOffsetB), anchored(kOffsetB)};
  std::vector<std::string> why;
  refine_by_streams(clocks, {&s0, &s1, &s2}, why);
  CHECK(clocks[0].method == AlignmentMethod::anchors);
  REQUIRE(clocks[1].method == AlignmentMethod::network);
  REQUIRE(clocks[2].method == AlignmentMethod::network);
  CHECK(clocks[1].net_peer == 0);
  CHECK(clocks[2].net_peer == 1);
  CHECK(clocks[2].net_bound_ns > clocks[1].net_bound_ns);
  CHECK(why[2].empty());
  CHECK(worst_error(p01, clocks[1]) <= static_cast<int64_t>(clocks[1].net_bound_ns));
  const int64_t worst = worst_error(p12, clocks[2]);
  INFO("host 2 worst " << worst << " ns, bound " << clocks[2].net_bound_ns);
  CHECK(worst <= static_cast<int64_t>(clocks[2].net_bound_ns));
}

namespace {

// A net_xfer record as the collector writes it: a receive call, or a
// segment's arrival (ST_NET_ARRIVAL: no call, tid 0, the socket's owner).
st_net_xfer recv_record(uint64_t ts, uint64_t dur, uint32_t seq_end, int32_t bytes, bool arrival) {
  st_net_xfer n{};
  n.hdr.kind = ST_EV_NET_XFER;
  n.hdr.size = sizeof(n);
  n.hdr.pid = 700;
  n.hdr.tid = arrival ? 0 : 701;
  n.hdr.ts_ns = ts;
  n.sock_id = 0xabc;
  n.dur_ns = dur;
  n.tuple.family = 2;
  std::memcpy(n.tuple.saddr, kAddrB, 16);
  std::memcpy(n.tuple.daddr, kAddrA, 16);
  n.tuple.sport = 29500;
  n.tuple.dport = 40000;
  n.bytes = bytes;
  n.dir = ST_NET_RECV;
  n.seq_end = seq_end;
  n.flags = ST_NET_SEQ_VALID | (arrival ? ST_NET_ARRIVAL : 0u);
  return n;
}

}  // namespace

TEST_CASE("stream marks: a segment's arrival is a receive mark at its instant, and no thread's call", "[multinode]") {
  StreamMarks marks;
  marks.enable();
  marks.on_event(Event{recv_record(50'000, 0, 9000, 1448, true)});
  marks.on_event(Event{recv_record(90'000, 20'000, 9000, 3000, false)});
  REQUIRE(marks.marks().size() == 2);
  const StreamMark& arrival = marks.marks()[0];
  CHECK_FALSE(arrival.send);
  CHECK(arrival.arrival);
  CHECK_FALSE(marks.marks()[1].arrival);
  CHECK(arrival.start == 50'000);
  CHECK(arrival.end == 50'000);
  CHECK(arrival.seq_end == 9000);
  CHECK(arrival.bytes == 1448);
  // The bytes flow from the peer (A, port 40000) to this end (B, 29500).
  CHECK(arrival.flow == stream_flow_id(kAddrA, 40000, kAddrB, 29500));
  CHECK(marks.marks()[1].flow == arrival.flow);
  CHECK(marks.marks()[1].start == 70'000);

  // The timeline and the socket table see the call only.
  TimelineStore tl;
  tl.on_event(Event{recv_record(50'000, 0, 9000, 1448, true)});
  CHECK(tl.threads().empty());
  tl.on_event(Event{recv_record(90'000, 20'000, 9000, 3000, false)});
  REQUIRE(tl.find(701) != nullptr);
  CHECK(tl.find(701)->spans.size() == 1);
  CHECK(tl.find(0) == nullptr);
  CollectorStats stats;
  stats.on_event(Event{recv_record(50'000, 0, 9000, 1448, true)});
  stats.on_event(Event{recv_record(90'000, 20'000, 9000, 3000, false)});
  REQUIRE(stats.socks.size() == 1);
  CHECK(stats.socks.begin()->second.recv.count == 1);
  CHECK(stats.socks.begin()->second.recv.bytes == 3000);
}

TEST_CASE("stream match: arrivals bound the clocks by the bytes' transit, not the receiver's wake-up", "[multinode]") {
  // The receivers wake 0.3-0.9 ms after the bytes arrive (a busy host); the
  // arrivals are recorded as the bytes reach the socket.
  Plan p;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> transit(8 * kUs, 30 * kUs), wake(300 * kUs, 900 * kUs);
  const uint64_t ab = stream_flow_id(kAddrA, 40000, kAddrB, 29500), ba = stream_flow_id(kAddrB, 29500, kAddrA, 40000);
  std::vector<StreamMark> a_calls, b_calls, a_arrivals, b_arrivals;
  uint32_t a_seq = p.a_seq0, b_seq = p.b_seq0;
  for (int i = 0; i < p.messages; ++i) {
    const int64_t t = kT0 + i * 2500 * kUs, u = t + kMs;
    a_seq += 3000;
    a_calls.push_back({ab, mono_a(t), mono_a(t + 5 * kUs), a_seq, 3000, true});
    const int64_t arrive = t + 5 * kUs + transit(rng);
    b_arrivals.push_back({ab, mono_b(p, arrive), mono_b(p, arrive), a_seq, 3000, false});
    b_calls.push_back({ab, mono_b(p, arrive + wake(rng)), mono_b(p, arrive + wake(rng) + 2 * kUs), a_seq, 3000, false});
    b_seq += 3000;
    b_calls.push_back({ba, mono_b(p, u), mono_b(p, u + 5 * kUs), b_seq, 3000, true});
    const int64_t arrive2 = u + 5 * kUs + transit(rng);
    a_arrivals.push_back({ba, mono_a(arrive2), mono_a(arrive2), b_seq, 3000, false});
    a_calls.push_back({ba, mono_a(arrive2 + wake(rng)), mono_a(arrive2 + wake(rng) + 2 * kUs), b_seq, 3000, false});
  }
  const HostAlignment ca = anchored(kOffsetA), cb = anchored(kOffsetB);
  const StreamFit calls_only = fit_stream_offset(b_calls, cb, a_calls, ca);
  std::vector<StreamMark> a_all = a_calls, b_all = b_calls;
  a_all.insert(a_all.end(), a_arrivals.begin(), a_arrivals.end());
  b_all.insert(b_all.end(), b_arrivals.begin(), b_arrivals.end());
  const StreamFit with_arrivals = fit_stream_offset(b_all, cb, a_all, ca);
  REQUIRE(calls_only.ok);
  REQUIRE(with_arrivals.ok);
  INFO("bound by calls " << calls_only.bound_ns << " ns, with arrivals " << with_arrivals.bound_ns << " ns");
  CHECK(calls_only.bound_ns >= 300 * kUs);         // the quickest wake-up each way
  CHECK(with_arrivals.bound_ns <= 45 * kUs);       // the quickest send + transit each way
  CHECK(worst_error(p, with_fit(cb, with_arrivals)) <= static_cast<int64_t>(with_arrivals.bound_ns));
  CHECK(worst_error(p, with_fit(cb, calls_only)) <= static_cast<int64_t>(calls_only.bound_ns));
}
