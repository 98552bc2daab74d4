// SPDX-License-Identifier: Apache-2.0
// Per-subsystem aggregates of the non-scheduler events: accelerator ioctls
// by command, block I/O by device and thread, TCP by socket.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "decode/event.h"
#include "decode/neuron_cmd.h"

namespace steptrace {

struct LatencyAgg {
  uint64_t count = 0;
  uint64_t total_ns = 0;
  uint64_t max_ns = 0;
  uint64_t bytes = 0;
  void add(uint64_t ns, uint64_t b) {
    ++count;
    total_ns += ns;
    if (ns > max_ns) max_ns = ns;
    bytes += b;
  }
};

struct AccelCmdStats {
  LatencyAgg agg;
  uint64_t errors = 0;
};

struct BlockKey {
  uint32_t dev;
  uint32_t tid;
  bool write;
  auto operator<=>(const BlockKey&) const = default;
};

struct SockStats {
  st_sock_tuple tuple{};
  uint32_t pid = 0;
  LatencyAgg send, recv;
  uint64_t retransmits = 0;
  uint64_t state_changes = 0;
  bool closed = false;  // reached TCP_CLOSE: no more traffic on this connection
};

struct CollectorStats {
  std::map<uint32_t, AccelCmdStats> accel_by_cmd;         // full cmd
  std::map<std::pair<uint32_t, uint32_t>, LatencyAgg> accel_by_tid_cmd;  // (tid, cmd)
  std::map<BlockKey, LatencyAgg> block;                  // issue->complete latency
  std::map<uint64_t, SockStats> socks;                   // by sock_id
  uint64_t uprobe_hits[8] = {};
  uint64_t first_ts = 0, last_ts = 0;

  void on_event(const Event& e);
  // A long session on a host that connects all day: keep at most `keep`
  // closed sockets (those that moved the most bytes); the rest are summed
  // into folded_socks so the table stays bounded.
  void fold_closed_sockets(size_t keep);
  SockStats folded_socks;
  uint64_t folded_sock_count = 0;
};

std::string format_tuple(const st_sock_tuple& t);
std::string format_dev(uint32_t kernel_dev);

}  // namespace steptrace
