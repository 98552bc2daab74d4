// SPDX-License-Identifier: Apache-2.0
// A capture's records and metadata moved onto another host's clock: the core
// of capshift (one capture) and capfleet (a fleet of nodes made from two).
// Every absolute monotonic time t becomes
//   t' = t + offset_ns + (t - t0) * ppm * 1e-6     (t0: the first record's ts_ns)
// in the records (header ts_ns; block_rq insert_ts/issue_ts, accel_ioctl and
// rdma_verb enter_ts, host_steal start_ns, each only when set), in the clock
// notes (their monotonic reading; their wall-clock reading moves by
// wall_error_ns) and in the metadata (window_start_ns, and
// realtime_minus_monotonic_ns so that wall times stay where they were).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capture/capture_file.h"

namespace steptrace {

struct ShiftSpec {
  std::string source;  // the input's path, named in the metadata and messages
  int64_t offset_ns = 0;
  double ppm = 0;
  int64_t wall_error_ns = 0;
  std::optional<std::string> boot_id;  // default: the old one + "-shifted"
  bool drop_stream_positions = false;  // net_xfer records as an older steptrace wrote them: no stream position
};

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

struct ShiftCounts {
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
size_t record_min_size(uint16_t kind);
// One record, in place.
void shift_record(std::vector<uint8_t>& b, ClockShift& clk, const ShiftSpec& a, ShiftCounts& n);
// The header's metadata for the shifted capture; "" or the reason it cannot be made.
std::string shift_meta(const CaptureContents& c, const ShiftSpec& a, ClockShift& clk, nlohmann::json& meta);

}  // namespace steptrace
