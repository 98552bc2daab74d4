// SPDX-License-Identifier: Apache-2.0
// Where each traced TCP call stood in its byte stream: the bytes it moved
// ([seq_end - bytes, seq_end) mod 2^32), which way, and when. Two hosts'
// marks of one connection name the same bytes: sent on one host (during the
// send call) and received on the other (before the receive call ended), so
// the pair bounds the offset between the two hosts' clocks from one side,
// and traffic the other way bounds it from the other (multinode/stream_match.h).
//
// Kept only when asked (a merge of several captures): a one-host report
// has no use for them. Bounded: past kMaxStreamMarks the marks are thinned
// to the calls whose first byte's position hashes into one stride-th of the
// positions (the stride doubled each time), the same rule on every host, so
// a message's send and the read or segment starting with its first byte are
// kept or dropped together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "decode/event.h"

namespace steptrace {

struct StreamMark {
  uint64_t flow = 0;        // the byte stream: hash of source address:port -> destination address:port
  uint64_t start = 0, end = 0;  // the call, CLOCK_MONOTONIC of the host that made it
  uint32_t seq_end = 0;     // one past the last byte it moved (mod 2^32)
  uint32_t bytes = 0;
  bool send = false;
  bool arrival = false;     // a receive: the bytes reached the socket (no call; start == end)
};

// The flow of bytes from (saddr, sport) to (daddr, dport).
uint64_t stream_flow_id(const uint8_t (&src)[16], uint16_t sport, const uint8_t (&dst)[16], uint16_t dport);

class StreamMarks {
 public:
  static constexpr size_t kMaxStreamMarks = size_t{1} << 16;
  explicit StreamMarks(size_t cap = kMaxStreamMarks) : cap_(cap < 2 ? 2 : cap) {}

  void enable() { enabled_ = true; }
  bool enabled() const { return enabled_; }
  void on_event(const Event& e);
  void add(const StreamMark& m);

  const std::vector<StreamMark>& marks() const { return marks_; }
  uint32_t stride() const { return stride_; }  // 1: every call kept
  uint64_t seen() const { return seen_; }      // calls with a stream position
  uint64_t without_position() const { return no_position_; }  // older captures' records

 private:
  bool keeps(const StreamMark& m) const;
  bool enabled_ = false;
  size_t cap_;
  uint32_t stride_ = 1;
  uint64_t seen_ = 0, no_position_ = 0;
  std::vector<StreamMark> marks_;
};

}  // namespace steptrace
