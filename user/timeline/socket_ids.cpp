// SPDX-License-Identifier: Apache-2.0
#include "timeline/socket_ids.h"

#include <algorithm>
#include <iterator>

namespace steptrace {

namespace {

constexpr uint32_t kTcpClose = 7;  // TCP_CLOSE: the socket is done; its address may be reused

bool known(const st_sock_tuple& t) { return t.sport != 0 && t.dport != 0; }

bool same(const st_sock_tuple& a, const st_sock_tuple& b) {
  return a.family == b.family && a.sport == b.sport && a.dport == b.dport &&
         std::equal(std::begin(a.saddr), std::end(a.saddr), std::begin(b.saddr)) &&
         std::equal(std::begin(a.daddr), std::end(a.daddr), std::begin(b.daddr));
}

}  // namespace

uint64_t SocketIds::key_for(uint64_t id, const st_sock_tuple& tuple) {
  auto [it, fresh] = ids_.try_emplace(id);
  Entry& e = it->second;
  if (fresh) {
    e.key = id;
    e.tuple = tuple;
    return e.key;
  }
  if (e.closed || (known(e.tuple) && known(tuple) && !same(e.tuple, tuple))) {
    // A new connection at a reused address. Kernel addresses differ in their
    // low 48 bits, so the generation in the top 16 keeps keys apart.
    ++e.generation;
    ++reused_;
    e.key = id ^ (static_cast<uint64_t>(e.generation & 0xffff) << 48);
    e.tuple = tuple;
    e.closed = false;
  } else if (!known(e.tuple)) {
    e.tuple = tuple;
  }
  return e.key;
}

const Event& SocketIds::rekey(const Event& ev) {
  if (const auto* n = std::get_if<st_net_xfer>(&ev)) {
    st_net_xfer x = *n;
    x.sock_id = key_for(n->sock_id, n->tuple);
    scratch_ = x;
    return scratch_;
  }
  if (const auto* r = std::get_if<st_tcp_retransmit>(&ev)) {
    st_tcp_retransmit x = *r;
    x.sock_id = key_for(r->sock_id, r->tuple);
    scratch_ = x;
    return scratch_;
  }
  if (const auto* s = std::get_if<st_tcp_state>(&ev)) {
    st_tcp_state x = *s;
    x.sock_id = key_for(s->sock_id, s->tuple);
    if (s->new_state == kTcpClose) ids_[s->sock_id].closed = true;
    scratch_ = x;
    return scratch_;
  }
  return ev;
}

}  // namespace steptrace
