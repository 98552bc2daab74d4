// SPDX-License-Identifier: Apache-2.0
#include "decode/decoder.h"

#include <cstring>

namespace steptrace {

uint64_t DecodeStats::total_decoded() const {
  uint64_t t = 0;
  for (auto v : decoded) t += v;
  return t;
}

std::string_view kind_name(uint32_t kind) {
  switch (kind) {
    case ST_EV_SCHED_SWITCH: return "sched_switch";
    case ST_EV_SCHED_WAKEUP: return "sched_wakeup";
    case ST_EV_TASK_NEW: return "task_new";
    case ST_EV_TASK_EXEC: return "task_exec";
    case ST_EV_TASK_EXIT: return "task_exit";
    case ST_EV_TASK_COMM: return "task_comm";
    case ST_EV_BLOCK_RQ: return "block_rq";
    case ST_EV_NET_XFER: return "net_xfer";
    case ST_EV_TCP_RETRANSMIT: return "tcp_retransmit";
    case ST_EV_TCP_STATE: return "tcp_state";
    case ST_EV_ACCEL_IOCTL: return "accel_ioctl";
    case ST_EV_UPROBE: return "uprobe";
    case ST_EV_ACCEL_TP: return "accel_tp";
    case ST_EV_RDMA_VERB: return "rdma_verb";
    case ST_EV_USER_NOTE: return "user_note";
    case ST_EV_HOST_STEAL: return "host_steal";
    case ST_EV_CPU_SAMPLE: return "cpu_sample";
    default: return "unknown";
  }
}

namespace {
template <typename T>
std::optional<Event> copy_as(const void* data, size_t len, DecodeStats& st, uint16_t kind) {
  if (len != sizeof(T)) {
    ++st.bad_size;
    return std::nullopt;
  }
  T v;
  std::memcpy(&v, data, sizeof(T));
  ++st.decoded[kind];
  return Event{v};
}
}  // namespace

std::optional<Event> Decoder::decode(const void* data, size_t len) {
  if (len < sizeof(st_event_header)) {
    ++stats_.bad_size;
    return std::nullopt;
  }
  st_event_header h;
  std::memcpy(&h, data, sizeof(h));
  // The ring buffer pads records to 8 bytes; the header says the real size.
  if (h.size < sizeof(st_event_header) || h.size > len) {
    ++stats_.bad_size;
    return std::nullopt;
  }
  len = h.size;
  switch (h.kind) {
    case ST_EV_SCHED_SWITCH:
      // ABI v1 records end before prev_queue_ns: read them with it unknown.
      if (len == ST_SCHED_SWITCH_V1_SIZE) {
        st_sched_switch v{};
        std::memcpy(&v, data, ST_SCHED_SWITCH_V1_SIZE);
        v.prev_queue_ns = ST_QUEUE_UNKNOWN;
        ++stats_.decoded[h.kind];
        return Event{v};
      }
      return copy_as<st_sched_switch>(data, len, stats_, h.kind);
    case ST_EV_SCHED_WAKEUP: return copy_as<st_sched_wakeup>(data, len, stats_, h.kind);
    case ST_EV_TASK_NEW: return copy_as<st_task_new>(data, len, stats_, h.kind);
    case ST_EV_TASK_EXEC:
    case ST_EV_TASK_COMM: return copy_as<st_task_comm>(data, len, stats_, h.kind);
    case ST_EV_TASK_EXIT: return copy_as<st_task_exit>(data, len, stats_, h.kind);
    case ST_EV_BLOCK_RQ: return copy_as<st_block_rq>(data, len, stats_, h.kind);
    case ST_EV_NET_XFER:
      // ABI v6 records end before seq_end: read them with no stream position.
      if (len == ST_NET_XFER_V6_SIZE) {
        st_net_xfer v{};
        std::memcpy(&v, data, ST_NET_XFER_V6_SIZE);
        ++stats_.decoded[h.kind];
        return Event{v};
      }
      return copy_as<st_net_xfer>(data, len, stats_, h.kind);
    case ST_EV_TCP_RETRANSMIT: return copy_as<st_tcp_retransmit>(data, len, stats_, h.kind);
    case ST_EV_TCP_STATE: return copy_as<st_tcp_state>(data, len, stats_, h.kind);
    case ST_EV_ACCEL_IOCTL: return copy_as<st_accel_ioctl>(data, len, stats_, h.kind);
    case ST_EV_UPROBE: return copy_as<st_uprobe>(data, len, stats_, h.kind);
    case ST_EV_ACCEL_TP: return copy_as<st_accel_tp>(data, len, stats_, h.kind);
    case ST_EV_RDMA_VERB: return copy_as<st_rdma_verb>(data, len, stats_, h.kind);
    case ST_EV_HOST_STEAL: return copy_as<st_host_steal>(data, len, stats_, h.kind);
    default: ++stats_.unknown_kind; return std::nullopt;
  }
}

}  // namespace steptrace
