// SPDX-License-Identifier: Apache-2.0
#include "timeline/collector_stats.h"

#include <algorithm>
#include <functional>
#include <vector>

#include <arpa/inet.h>
#include <fmt/core.h>

#include "decode/neuron_cmd.h"

namespace steptrace {

std::string format_dev(uint32_t kernel_dev) { return fmt::format("{}:{}", kernel_dev >> 20, kernel_dev & 0xfffff); }

std::string format_tuple(const st_sock_tuple& t) {
  char s[INET6_ADDRSTRLEN] = "?", d[INET6_ADDRSTRLEN] = "?";
  static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  bool v4 = std::equal(v4mapped, v4mapped + 12, t.saddr);
  if (v4) {
    inet_ntop(AF_INET, t.saddr + 12, s, sizeof(s));
    inet_ntop(AF_INET, t.daddr + 12, d, sizeof(d));
    return fmt::format("{}:{}->{}:{}", s, t.sport, d, t.dport);
  }
  inet_ntop(AF_INET6, t.saddr, s, sizeof(s));
  inet_ntop(AF_INET6, t.daddr, d, sizeof(d));
  return fmt::format("[{}]:{}->[{}]:{}", s, t.sport, d, t.dport);
}

// A socket's tuple is incomplete before bind/connect and after close
// (the local port is released in TCP_CLOSE): keep the first complete one.
static void keep_tuple(SockStats& s, const st_sock_tuple& t) {
  if (s.tuple.sport == 0 || s.tuple.dport == 0) s.tuple = t;
}

void CollectorStats::on_event(const Event& ev) {
  const auto& h = header_of(ev);
  if (first_ts == 0 || h.ts_ns < first_ts) first_ts = h.ts_ns;
  if (h.ts_ns > last_ts) last_ts = h.ts_ns;
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, st_accel_ioctl>) {
          uint64_t dur = e.hdr.ts_ns > e.enter_ts ? e.hdr.ts_ns - e.enter_ts : 0;
          auto& s = accel_by_cmd[e.cmd];
          s.agg.add(dur, e.bytes);
          if (e.ret < 0) ++s.errors;
          accel_by_tid_cmd[{e.hdr.tid, e.cmd}].add(dur, e.bytes);
        } else if constexpr (std::is_same_v<T, st_block_rq>) {
          uint64_t start = e.issue_ts ? e.issue_ts : e.insert_ts;
          uint64_t lat = start && e.hdr.ts_ns > start ? e.hdr.ts_ns - start : 0;
          block[BlockKey{e.dev, e.hdr.tid, (e.flags & ST_RQ_WRITE) != 0}].add(lat, e.bytes);
        } else if constexpr (std::is_same_v<T, st_net_xfer>) {
          auto& s = socks[e.sock_id];
          keep_tuple(s, e.tuple);
          s.pid = e.hdr.pid;
          if (e.flags & ST_NET_ARRIVAL) return;  // a segment's arrival, not a call (the clock bound's)
          (e.dir == ST_NET_SEND ? s.send : s.recv).add(e.dur_ns, static_cast<uint64_t>(e.bytes));
        } else if constexpr (std::is_same_v<T, st_tcp_retransmit>) {
          auto& s = socks[e.sock_id];
          keep_tuple(s, e.tuple);
          ++s.retransmits;
        } else if constexpr (std::is_same_v<T, st_tcp_state>) {
          auto& s = socks[e.sock_id];
          keep_tuple(s, e.tuple);
          if (s.pid == 0) s.pid = e.hdr.pid;
          ++s.state_changes;
          if (e.new_state == 7) s.closed = true;  // TCP_CLOSE
        } else if constexpr (std::is_same_v<T, st_uprobe>) {
          if (e.probe < 8) ++uprobe_hits[e.probe];
        }
      },
      ev);
}

void CollectorStats::fold_closed_sockets(size_t keep) {
  std::vector<std::pair<uint64_t, uint64_t>> closed;  // (bytes, key)
  for (const auto& [key, s] : socks)
    if (s.closed) closed.emplace_back(s.send.bytes + s.recv.bytes, key);
  if (closed.size() <= keep) return;
  std::sort(closed.begin(), closed.end(), std::greater<>());
  auto add = [](LatencyAgg& into, const LatencyAgg& a) {
    into.count += a.count;
    into.total_ns += a.total_ns;
    into.max_ns = std::max(into.max_ns, a.max_ns);
    into.bytes += a.bytes;
  };
  for (size_t i = keep; i < closed.size(); ++i) {
    auto it = socks.find(closed[i].second);
    add(folded_socks.send, it->second.send);
    add(folded_socks.recv, it->second.recv);
    folded_socks.retransmits += it->second.retransmits;
    folded_socks.state_changes += it->second.state_changes;
    ++folded_sock_count;
    socks.erase(it);
  }
}

}  // namespace steptrace
