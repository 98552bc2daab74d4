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
#include "capture_shift.h"
#include "steptrace_abi.h"

using namespace steptrace;

namespace {

constexpr const char* kUsage =
    "usage: capshift IN OUT --offset-ns N --ppm X [--wall-error-ns E] [--boot-id ID] [--drop-stream-positions]";

struct Args : ShiftSpec {
  std::string in, out;
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
  a.source = a.in;
  a.out = pos[1];
  return "";
}

void print_counts(const Args& a, const CaptureContents& c, const ClockShift& clk, const ShiftCounts& n) {
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
  ShiftCounts n;
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
