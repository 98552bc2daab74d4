// SPDX-License-Identifier: Apache-2.0
// A socket's id in the kernel records is its address, and the kernel reuses
// the address of a freed socket for the next one. Every consumer keys sockets
// by a connection key instead: the id itself for the first connection at that
// address, a new key for each later one (after a close, or when the 4-tuple
// changes), so a reused id starts a new socket with its own tuple and totals.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "decode/event.h"

namespace steptrace {

class SocketIds {
 public:
  // The event with its sock_id replaced by the connection key (net transfers,
  // retransmits and state changes); other events are returned as they are.
  const Event& rekey(const Event& e);
  uint64_t reused() const { return reused_; }  // connections that got a new key

 private:
  struct Entry {
    uint64_t key = 0;
    uint32_t generation = 0;
    st_sock_tuple tuple{};
    bool closed = false;
  };
  uint64_t key_for(uint64_t id, const st_sock_tuple& tuple);

  // One entry per address ever seen: bounded by the kernel's socket slab, not
  // by the number of connections.
  std::unordered_map<uint64_t, Entry> ids_;
  Event scratch_;
  uint64_t reused_ = 0;
};

}  // namespace steptrace
