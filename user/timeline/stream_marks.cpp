// SPDX-License-Identifier: Apache-2.0
#include "timeline/stream_marks.h"

#include <algorithm>
#include <variant>

namespace steptrace {

uint64_t stream_flow_id(const uint8_t (&src)[16], uint16_t sport, const uint8_t (&dst)[16], uint16_t dport) {
  // FNV-1a over the directed 4-tuple: the same bytes on both hosts.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint8_t b) {
    h ^= b;
    h *= 1099511628211ull;
  };
  for (uint8_t b : src) mix(b);
  mix(static_cast<uint8_t>(sport >> 8));
  mix(static_cast<uint8_t>(sport));
  for (uint8_t b : dst) mix(b);
  mix(static_cast<uint8_t>(dport >> 8));
  mix(static_cast<uint8_t>(dport));
  return h;
}

void StreamMarks::on_event(const Event& e) {
  const auto* n = std::get_if<st_net_xfer>(&e);
  if (!n || n->bytes <= 0) return;
  if (!(n->flags & ST_NET_SEQ_VALID)) {
    ++no_position_;
    return;
  }
  StreamMark m;
  m.send = n->dir == ST_NET_SEND;
  // A send's bytes flow from this end (saddr) to the peer; a receive's from the peer.
  m.flow = m.send ? stream_flow_id(n->tuple.saddr, n->tuple.sport, n->tuple.daddr, n->tuple.dport)
                  : stream_flow_id(n->tuple.daddr, n->tuple.dport, n->tuple.saddr, n->tuple.sport);
  // An arrival (ST_NET_ARRIVAL) is a receive with no call: the bytes were
  // there at its instant, before any receive call returned them.
  m.end = n->hdr.ts_ns;
  m.start = n->dur_ns && n->dur_ns < m.end ? m.end - n->dur_ns : m.end;
  m.arrival = (n->flags & ST_NET_ARRIVAL) != 0;
  m.seq_end = n->seq_end;
  m.bytes = static_cast<uint32_t>(n->bytes);
  add(m);
}

namespace {

// A 32-bit mix of a byte's stream position (murmur3's finalizer): the same
// on both hosts of a connection, spread evenly whatever the message sizes.
uint32_t position_hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

}  // namespace

// The call's (or segment's) first byte hashes into one stride-th of the
// positions. A message's send and the segment or read that starts with its
// first byte are then kept or dropped together on the two hosts, small
// messages as often as large ones: the quick exchanges that bound the clocks
// survive the thinning in proportion. (Keeping the calls that hold a multiple
// of the stride, as before, kept every large call and almost no small one
// once the stride passed the message size: a 3-minute two-node recording
// thinned twice over stated +-243 us where all its marks gave +-9.7.)
bool StreamMarks::keeps(const StreamMark& m) const {
  return (position_hash(m.seq_end - m.bytes) & (stride_ - 1)) == 0;
}

void StreamMarks::add(const StreamMark& m) {
  ++seen_;
  if (!keeps(m)) return;
  marks_.push_back(m);
  while (marks_.size() >= cap_ && stride_ < (1u << 31)) {
    stride_ *= 2;
    marks_.erase(std::remove_if(marks_.begin(), marks_.end(), [this](const StreamMark& k) { return !keeps(k); }),
                 marks_.end());
  }
}

}  // namespace steptrace
