// SPDX-License-Identifier: Apache-2.0
#include "capture_shift.h"

#include <cmath>
#include <cstring>

#include "capture/user_note.h"
#include "pipeline/clock_notes.h"
#include "steptrace_abi.h"

namespace steptrace {

size_t record_min_size(uint16_t kind) {
  switch (kind) {
    case ST_EV_SCHED_SWITCH: return ST_SCHED_SWITCH_V1_SIZE;  // ABI v1 records end before prev_queue_ns
    case ST_EV_SCHED_WAKEUP: return sizeof(st_sched_wakeup);
    case ST_EV_TASK_NEW: return sizeof(st_task_new);
    case ST_EV_TASK_EXEC:
    case ST_EV_TASK_COMM: return sizeof(st_task_comm);
    case ST_EV_TASK_EXIT: return sizeof(st_task_exit);
    case ST_EV_BLOCK_RQ: return sizeof(st_block_rq);
    case ST_EV_NET_XFER: return ST_NET_XFER_V6_SIZE;  // ABI v6 records end before seq_end
    case ST_EV_TCP_RETRANSMIT: return sizeof(st_tcp_retransmit);
    case ST_EV_TCP_STATE: return sizeof(st_tcp_state);
    case ST_EV_ACCEL_IOCTL: return sizeof(st_accel_ioctl);
    case ST_EV_UPROBE: return sizeof(st_uprobe);
    case ST_EV_ACCEL_TP: return sizeof(st_accel_tp);
    case ST_EV_RDMA_VERB: return sizeof(st_rdma_verb);
    case ST_EV_USER_NOTE: return sizeof(st_user_note);
    case ST_EV_HOST_STEAL: return sizeof(st_host_steal);
    case ST_EV_CPU_SAMPLE: return ST_CPU_SAMPLE_HDR_SIZE;
    default: return 0;
  }
}

namespace {

// Shifts the u64 at `off` (the caller checked the record holds it); 0 means
// unknown and stays 0.
void shift_at(std::vector<uint8_t>& b, size_t off, ClockShift& clk, ShiftCounts& n) {
  uint64_t v;
  std::memcpy(&v, b.data() + off, sizeof(v));
  if (!v) return;
  v = clk(v);
  std::memcpy(b.data() + off, &v, sizeof(v));
  ++n.fields;
}

// A user note with its header already shifted: a clock note's anchor moves
// (monotonic by the shift, realtime by the wall clock's error); every other
// note type carries no monotonic time (identity, lib_probe, parent, symbols)
// and is kept as it is.
void shift_note(std::vector<uint8_t>& b, ClockShift& clk, int64_t wall_error_ns, ShiftCounts& n) {
  auto note = parse_user_note(b.data(), b.size());
  if (!note) {
    ++n.notes["(malformed)"];
    return;
  }
  auto type = note->find("note");
  ++n.notes[type != note->end() && type->is_string() ? type->get<std::string>() : "(untyped)"];
  if (type == note->end() || *type != "clock") return;
  auto a = anchor_in_note(*note);
  if (!a) {
    ++n.clock_notes_bad;
    return;
  }
  ClockAnchor moved = *a;
  moved.mono_ns = clk(a->mono_ns);
  moved.real_ns = a->real_ns + wall_error_ns;
  nlohmann::json body = *note;  // fields a newer steptrace may have added stay
  body.update(clock_note(moved));
  st_event_header h;
  std::memcpy(&h, b.data(), sizeof(h));
  auto rec = make_user_note(h.ts_ns, h.pid, body);
  if (rec.empty()) {
    ++n.clock_notes_bad;
    return;
  }
  st_event_header nh;
  std::memcpy(&nh, rec.data(), sizeof(nh));
  nh.cpu = h.cpu;
  nh.tid = h.tid;
  std::memcpy(rec.data(), &nh, sizeof(nh));
  b = std::move(rec);
  ++n.clock_notes;
}

}  // namespace

void shift_record(std::vector<uint8_t>& b, ClockShift& clk, const ShiftSpec& a, ShiftCounts& n) {
  ++n.records;
  st_event_header h;
  if (b.size() < sizeof(h)) {
    ++n.short_records;
    return;
  }
  std::memcpy(&h, b.data(), sizeof(h));
  // The ring buffer pads records to 8 bytes: the header's size is the record.
  const size_t size = h.size;
  const size_t need = record_min_size(h.kind);
  if (size < sizeof(h) || size > b.size() || size < need) {
    ++n.short_records;
    return;
  }
  if (!need) ++n.unknown_kind;
  h.ts_ns = clk(h.ts_ns);
  std::memcpy(b.data(), &h, sizeof(h));
  switch (h.kind) {
    case ST_EV_BLOCK_RQ:
      shift_at(b, offsetof(st_block_rq, insert_ts), clk, n);
      shift_at(b, offsetof(st_block_rq, issue_ts), clk, n);
      break;
    // enter_ts is always set by the collector; a 0 would be unknown, and stays so.
    case ST_EV_ACCEL_IOCTL: shift_at(b, offsetof(st_accel_ioctl, enter_ts), clk, n); break;
    case ST_EV_RDMA_VERB: shift_at(b, offsetof(st_rdma_verb, enter_ts), clk, n); break;
    case ST_EV_HOST_STEAL: shift_at(b, offsetof(st_host_steal, start_ns), clk, n); break;
    case ST_EV_USER_NOTE: shift_note(b, clk, a.wall_error_ns, n); break;
    case ST_EV_NET_XFER:
      if (a.drop_stream_positions && size >= sizeof(st_net_xfer)) {
        const uint32_t none = 0;
        std::memcpy(b.data() + offsetof(st_net_xfer, flags), &none, sizeof(none));
        ++n.stream_positions_dropped;
      }
      break;
    default: break;
  }
}

namespace {

// When realtime_minus_monotonic_ns was read: a session reads it as it starts
// (window_start_ns), the daemon's flight recorder as it dumps (the window's end).
uint64_t offset_read_at(const CaptureContents& c, uint64_t t0) {
  const auto& m = c.meta;
  if (m.contains("dump_reason") && c.window_end_ns) return *c.window_end_ns;
  if (auto w = m.find("window_start_ns"); w != m.end() && w->is_number_unsigned() && w->get<uint64_t>())
    return w->get<uint64_t>();
  return t0;
}

}  // namespace

std::string shift_meta(const CaptureContents& c, const ShiftSpec& a, ClockShift& clk, nlohmann::json& meta) {
  meta = c.meta;
  std::string old_boot;
  if (auto b = meta.find("boot_id"); b != meta.end() && b->is_string()) old_boot = b->get<std::string>();
  if (a.boot_id)
    meta["boot_id"] = *a.boot_id;
  else if (!old_boot.empty())
    meta["boot_id"] = old_boot + "-shifted";
  else
    std::fprintf(stderr, "capshift: %s has no boot_id (an unknown boot is never taken to share a clock); none set\n",
                 a.source.c_str());
  if (auto r = meta.find("realtime_minus_monotonic_ns"); r != meta.end() && r->is_number_integer()) {
    const int64_t off = r->get<int64_t>();
    if (off != 0) meta["realtime_minus_monotonic_ns"] = off - clk.delta(offset_read_at(c, clk.t0)) + a.wall_error_ns;
  }
  if (auto w = meta.find("window_start_ns"); w != meta.end() && w->is_number_unsigned() && w->get<uint64_t>())
    meta["window_start_ns"] = clk(w->get<uint64_t>());
  meta["capshift"] = {{"source", a.source},
                      {"offset_ns", a.offset_ns},
                      {"ppm", a.ppm},
                      {"wall_error_ns", a.wall_error_ns},
                      {"t0_ns", clk.t0},
                      {"boot_id_was", old_boot}};
  if (clk.bad) return "the shift takes window_start_ns (" + std::to_string(*clk.bad) + ") out of range";
  return "";
}


}  // namespace steptrace
