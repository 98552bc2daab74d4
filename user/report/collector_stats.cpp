// SPDX-License-Identifier: Apache-2.0
#include "report/collector_stats.h"

#include <arpa/inet.h>
#include <fmt/core.h>

#include "neuron_uapi.h"

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

std::string neuron_cmd_name(uint32_t cmd) {
  switch (cmd) {
#define C(x) \
  case NEURON_CMD_##x: return #x;
    C(DEVICE_INFO) C(MEM_ALLOC) C(MEM_FREE) C(MEM_COPY) C(MEM_COPY64) C(MEM_COPY64_V2) C(MEM_BUF_COPY)
    C(MEM_BUF_COPY64) C(PROGRAM_ENGINE) C(MEMSET) C(MEMSET64) C(MEM_GET_EXTENDED_INFO) C(DMA_ENG_SET_STATE)
    C(DMA_QUEUE_INIT) C(DMA_QUEUE_RELEASE) C(DMA_QUEUE_COPY_START) C(DMA_ACK_COMPLETED) C(DMA_COPY_DESCRIPTORS)
    C(DMA_COPY_DESCRIPTORS64) C(SEMAPHORE_INCREMENT) C(SEMAPHORE_DECREMENT) C(SEMAPHORE_READ) C(SEMAPHORE_WRITE)
    C(EVENT_SET) C(EVENT_GET) C(NOTIFICATIONS_INIT_V2) C(ACQUIRE_NEURON_DS) C(RELEASE_NEURON_DS)
    C(CRWL_READER_ENTER) C(CRWL_READER_EXIT) C(CRWL_WRITER_ENTER) C(CRWL_WRITER_DOWNGRADE) C(CRWL_NC_RANGE_MARK)
    C(CRWL_NC_RANGE_UNMARK) C(CINIT_SET_STATE) C(MEM_ALLOC_V2) C(MEM_ALLOC_V2MT) C(MEM_ALLOC_V2MT64) C(NC_RESET)
    C(NC_RESET_READY) C(PROGRAM_ENGINE_NC) C(PROGRAM_ENGINE_NC64) C(DMABUF_FD) C(MEM_COPY_ASYNC)
    C(MEM_COPY_ASYNC64) C(MEM_COPY_ASYNC_WAIT) C(DRIVER_INFO_GET) C(MEM_BUF_ZEROCOPY64) C(MEM_BUF_ZEROCOPY64_V2)
    C(MEM_BUF_ZEROCOPY64_BATCHES) C(DMA_QUEUE_INIT_BATCH)
#undef C
    default: return fmt::format("0x{:08x}", cmd);
  }
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
        } else if constexpr (std::is_same_v<T, st_uprobe>) {
          if (e.probe < 8) ++uprobe_hits[e.probe];
        }
      },
      ev);
}

}  // namespace steptrace
