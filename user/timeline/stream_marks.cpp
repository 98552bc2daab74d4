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

// The call's bytes hold a multiple of the stride. The stride divides 2^32,
// so the rule reads the same through a wrap of the sequence space.
bool StreamMarks::keeps(const StreamMark& m) const {
  const uint32_t first = m.seq_end - m.bytes;
  const uint32_t to_next_multiple = (0u - first) & (stride_ - 1);
  return to_next_multiple < m.bytes;
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
