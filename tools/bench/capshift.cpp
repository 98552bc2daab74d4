// SPDX-License-Identifier: Apache-2.0
// capshift: a capture rewritten as if another host had recorded it - one
// whose CLOCK_MONOTONIC is offset from this one's and runs at another rate.
// Every absolute monotonic time t becomes
//   t' = t + offset_ns + (t - t0) * ppm * 1e-6     (t0: the first record's ts_ns)
// in the records (header ts_ns; block_rq insert_ts/issue_ts, accel_ioctl and
// rdma_verb enter_ts, host_steal start_ns, each only when set), in the clock
// notes (their monotonic reading; their wall-clock reading moves by
// --wall-error-ns, 0: the host's wall clock is right), in the metadata
// (window_start_ns, and realtime_minus_monotonic_ns so that wall times stay
// where they were) and in the trailer (window_end_ns). Durations are not
// touched: a drift of a few ppm changes them far below what the analysis
// resolves. The boot id changes (default: the old one + "-shifted"), so that a
// merge does not take the capture to share a clock with its original. The
// records keep their order and number; the drop counters are kept.
//
//   capshift IN OUT --offset-ns N --ppm X [--wall-error-ns E] [--boot-id ID] [--drop-stream-positions]
// --drop-stream-positions clears every net_xfer record's stream position (as a
// steptrace before ABI 7 wrote them), to test a merge without them.
//
// Prints one JSON line (t0_ns, the records, what was shifted); exit 2 on bad
// arguments, 1 on a read or write error.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "capture/capture_file.h"
#include "capture/user_note.h"
#include "pipeline/clock_notes.h"
#include "steptrace_abi.h"

using namespace steptrace;

namespace {

constexpr const char* kUsage =
    "usage: capshift IN OUT --offset-ns N --ppm X [--wall-error-ns E] [--boot-id ID] [--drop-stream-positions]";

struct Args {
  std::string in, out;
  int64_t offset_ns = 0;
  double ppm = 0;
  int64_t wall_error_ns = 0;
  std::optional<std::string> boot_id;
  bool drop_stream_positions = false;  // net_xfer records as an older steptrace wrote them: no stream position
};

bool parse_i64(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  v = x;
  return true;
}

bool parse_f64(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(x)) return false;
  v = x;
  return true;
}

// "" when the arguments are good, else the one-line reason.
std::string parse_args(int argc, char** argv, Args& a) {
  std::vector<std::string> pos;
  bool have_offset = false, have_ppm = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], val;
    const bool is_opt = arg.size() > 2 && arg.compare(0, 2, "--") == 0;
    if (!is_opt) {
      pos.push_back(arg);
      continue;
    }
    if (auto eq = arg.find('='); eq != std::string::npos) {
      val = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (arg == "--offset-ns" || arg == "--ppm" || arg == "--wall-error-ns" || arg == "--boot-id") {
      if (i + 1 >= argc) return arg + " needs a value";
      val = argv[++i];
    }
    if (arg == "--offset-ns") {
      if (!parse_i64(val, a.offset_ns)) return "--offset-ns: not an integer (ns): " + val;
      have_offset = true;
    } else if (arg == "--ppm") {
      if (!parse_f64(val, a.ppm) || std::fabs(a.ppm) >= 1e5) return "--ppm: not a number of ppm in (-1e5, 1e5): " + val;
      have_ppm = true;
    } else if (arg == "--wall-error-ns") {
      if (!parse_i64(val, a.wall_error_ns)) return "--wall-error-ns: not an integer (ns): " + val;
    } else if (arg == "--boot-id") {
      if (val.empty()) return "--boot-id: empty";
      a.boot_id = val;
    } else if (arg == "--drop-stream-positions") {
      if (!val.empty()) return "--drop-stream-positions takes no value";
      a.drop_stream_positions = true;
    } else {
      return "unknown option " + arg;
    }
  }
  if (pos.size() != 2) return "expected IN and OUT";
  if (!have_offset || !have_ppm) return "--offset-ns and --ppm are required";
  a.in = pos[0];
  a.out = pos[1];
  return "";
}

// t -> t + offset + (t - t0) * ppm * 1e-6, rounded to the nanosecond (never
// decreasing in t: the records keep their order). A result outside (0, 2^63)
// is refused: `bad` holds the first such input.
struct ClockShift {
  uint64_t t0 = 0;
  int64_t offset_ns = 0;
  long double ppm = 0;
  std::optional<uint64_t> bad;

  int64_t delta(uint64_t t) const {
    const long double since = static_cast<long double>(static_cast<int64_t>(t) - static_cast<int64_t>(t0));
    return offset_ns + static_cast<int64_t>(std::llround(since * ppm * 1e-6L));
  }
  uint64_t operator()(uint64_t t) {
    const long double r = static_cast<long double>(t) + static_cast<long double>(delta(t));
    if (t > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || r <= 0 ||
        r >= static_cast<long double>(std::numeric_limits<int64_t>::max())) {
      if (!bad) bad = t;
      return t;
    }
    return static_cast<uint64_t>(static_cast<int64_t>(t) + delta(t));
  }
};

struct Counts {
  uint64_t records = 0;
  uint64_t short_records = 0;  // too short for their kind (or a header size past the record): copied unchanged
  uint64_t unknown_kind = 0;   // header shifted, the rest copied
  uint64_t fields = 0;         // timestamps shifted besides the headers
  uint64_t clock_notes = 0;
  uint64_t clock_notes_bad = 0;  // "clock" notes without a usable anchor: header shifted, body kept
  uint64_t stream_positions_dropped = 0;
  std::map<std::string, uint64_t> notes;  // every note type seen
};

// The smallest record of `kind` that holds all of its fields; 0 for a kind
// this build does not know.
size_t min_size(uint16_t kind) {
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

// Shifts the u64 at `off` (the caller checked the record holds it); 0 means
// unknown and stays 0.
void shift_at(std::vector<uint8_t>& b, size_t off, ClockShift& clk, Counts& n) {
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
void shift_note(std::vector<uint8_t>& b, ClockShift& clk, int64_t wall_error_ns, Counts& n) {
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

// One record, in place.
void shift_record(std::vector<uint8_t>& b, ClockShift& clk, const Args& a, Counts& n) {
  ++n.records;
  st_event_header h;
  if (b.size() < sizeof(h)) {
    ++n.short_records;
    return;
  }
  std::memcpy(&h, b.data(), sizeof(h));
  // The ring buffer pads records to 8 bytes: the header's size is the record.
  const size_t size = h.size;
  const size_t need = min_size(h.kind);
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

// When realtime_minus_monotonic_ns was read: a session reads it as it starts
// (window_start_ns), the daemon's flight recorder as it dumps (the window's end).
uint64_t offset_read_at(const CaptureContents& c, uint64_t t0) {
  const auto& m = c.meta;
  if (m.contains("dump_reason") && c.window_end_ns) return *c.window_end_ns;
  if (auto w = m.find("window_start_ns"); w != m.end() && w->is_number_unsigned() && w->get<uint64_t>())
    return w->get<uint64_t>();
  return t0;
}

// The header's metadata for the shifted capture; "" or the reason it cannot be made.
std::string shift_meta(const CaptureContents& c, const Args& a, ClockShift& clk, nlohmann::json& meta) {
  meta = c.meta;
  std::string old_boot;
  if (auto b = meta.find("boot_id"); b != meta.end() && b->is_string()) old_boot = b->get<std::string>();
  if (a.boot_id)
    meta["boot_id"] = *a.boot_id;
  else if (!old_boot.empty())
    meta["boot_id"] = old_boot + "-shifted";
  else
    std::fprintf(stderr, "capshift: %s has no boot_id (an unknown boot is never taken to share a clock); none set\n",
                 a.in.c_str());
  if (auto r = meta.find("realtime_minus_monotonic_ns"); r != meta.end() && r->is_number_integer()) {
    const int64_t off = r->get<int64_t>();
    if (off != 0) meta["realtime_minus_monotonic_ns"] = off - clk.delta(offset_read_at(c, clk.t0)) + a.wall_error_ns;
  }
  if (auto w = meta.find("window_start_ns"); w != meta.end() && w->is_number_unsigned() && w->get<uint64_t>())
    meta["window_start_ns"] = clk(w->get<uint64_t>());
  meta["capshift"] = {{"source", a.in},
                      {"offset_ns", a.offset_ns},
                      {"ppm", a.ppm},
                      {"wall_error_ns", a.wall_error_ns},
                      {"t0_ns", clk.t0},
                      {"boot_id_was", old_boot}};
  if (clk.bad) return "the shift takes window_start_ns (" + std::to_string(*clk.bad) + ") out of range";
  return "";
}

void print_counts(const Args& a, const CaptureContents& c, const ClockShift& clk, const Counts& n) {
  if (n.short_records)
    std::fprintf(stderr, "capshift: %llu record(s) too short for their kind, copied unchanged\n",
                 static_cast<unsigned long long>(n.short_records));
  if (n.unknown_kind)
    std::fprintf(stderr, "capshift: %llu record(s) of kinds this build does not know: only their header's ts_ns moved\n",
                 static_cast<unsigned long long>(n.unknown_kind));
  if (n.clock_notes_bad)
    std::fprintf(stderr, "capshift: %llu clock note(s) without a usable anchor, body kept\n",
                 static_cast<unsigned long long>(n.clock_notes_bad));
  if (c.truncated) std::fprintf(stderr, "capshift: %s has no trailer (cut short); OUT gets one, drop counters zero\n", a.in.c_str());
  nlohmann::json notes = n.notes;
  nlohmann::json j = {{"out", a.out},          {"records", n.records},        {"t0_ns", clk.t0},
                      {"offset_ns", a.offset_ns}, {"ppm", a.ppm},            {"wall_error_ns", a.wall_error_ns},
                      {"fields_shifted", n.fields}, {"clock_notes", n.clock_notes}, {"notes", notes},
                      {"short_records", n.short_records}, {"stream_positions_dropped", n.stream_positions_dropped}};
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto e = parse_args(argc, argv, a); !e.empty()) {
    std::fprintf(stderr, "capshift: %s (%s)\n", e.c_str(), kUsage);
    return 2;
  }
  // Pass 1: t0 and the metadata (memory stays one chunk, whatever the size).
  ClockShift clk;
  clk.offset_ns = a.offset_ns;
  clk.ppm = a.ppm;
  bool have_t0 = false;
  auto first = read_capture(a.in, [&](const void* d, size_t len) {
    if (have_t0 || len < sizeof(st_event_header)) return;
    st_event_header h;
    std::memcpy(&h, d, sizeof(h));
    clk.t0 = h.ts_ns;
    have_t0 = true;
  });
  if (!first) {
    std::fprintf(stderr, "capshift: %s\n", first.error().message.c_str());  // it names the file
    return 1;
  }
  if (!have_t0)  // no records: the window's start stands for the first
    if (auto s = first->meta.find("window_start_ns"); s != first->meta.end() && s->is_number_unsigned())
      clk.t0 = s->get<uint64_t>();
  nlohmann::json meta;
  if (auto e = shift_meta(*first, a, clk, meta); !e.empty()) {
    std::fprintf(stderr, "capshift: %s\n", e.c_str());
    return 2;
  }
  CaptureWriterOptions opt;
  opt.overwrite = true;
  auto w = CaptureWriter::create(a.out, meta, opt);
  if (!w) {
    std::fprintf(stderr, "capshift: %s\n", w.error().message.c_str());
    return 1;
  }
  std::unique_ptr<CaptureWriter> writer = std::move(*w);
  // Pass 2: every record, shifted, in its order.
  Counts n;
  std::string write_error;
  uint64_t newest = 0;
  auto in = read_capture(a.in, [&](const void* d, size_t len) {
    std::vector<uint8_t> b(static_cast<const uint8_t*>(d), static_cast<const uint8_t*>(d) + len);
    shift_record(b, clk, a, n);
    if (b.size() >= sizeof(st_event_header)) {
      st_event_header h;
      std::memcpy(&h, b.data(), sizeof(h));
      if (h.kind != ST_EV_USER_NOTE) newest = std::max<uint64_t>(newest, h.ts_ns);
    }
    if (!write_error.empty()) return;
    if (auto st = writer->append(b.data(), b.size()); !st) write_error = st.error().message;
  });
  // A failure leaves no OUT (and no OUT.tmp) behind.
  auto fail = [&](int rc, const std::string& what) {
    writer.reset();
    ::unlink((a.out + ".tmp").c_str());
    std::fprintf(stderr, "capshift: %s\n", what.c_str());
    return rc;
  };
  if (!in) return fail(1, in.error().message);
  if (!write_error.empty()) return fail(1, write_error);
  if (clk.bad) return fail(2, "the shift takes a timestamp (" + std::to_string(*clk.bad) + ") out of range");
  const uint64_t window_end = in->window_end_ns && *in->window_end_ns ? clk(*in->window_end_ns) : newest;
  const std::string how = in->truncated ? "cut short: no trailer (capshift wrote this one)"
                                        : (in->end.empty() ? std::string(kCaptureComplete) : in->end);
  if (clk.bad) return fail(2, "the shift takes window_end_ns (" + std::to_string(*clk.bad) + ") out of range");
  if (auto st = writer->close(in->drops, window_end, how); !st) {
    std::fprintf(stderr, "capshift: %s\n", st.error().message.c_str());
    return 1;
  }
  print_counts(a, *in, clk, n);
  return 0;
}
