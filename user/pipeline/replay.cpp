// SPDX-License-Identifier: Apache-2.0
#include <fmt/core.h>

#include <cstring>
#include <functional>
#include <limits>

#include "pipeline/replay.h"

#include "capture/capture_file.h"
#include "pipeline/pipeline.h"
#include "util/text.h"

namespace steptrace {
namespace {

// A metadata field of the wrong JSON type (or out of range) is ignored with a
// warning: the records are what the report is made of.
template <typename T>
T meta_uint(const nlohmann::json& m, const char* key, T fallback, std::vector<std::string>& warnings) {
  auto it = m.find(key);
  if (it == m.end()) return fallback;
  if (it->is_number_unsigned() && it->get<uint64_t>() <= std::numeric_limits<T>::max()) return it->get<T>();
  warnings.push_back(fmt::format("capture metadata: \"{}\" is not an unsigned integer{} ({}); ignored", key,
                                 sizeof(T) < 8 ? " below 2^32" : "", it->type_name()));
  return fallback;
}

using RecordFn = std::function<void(const void*, size_t)>;

Result<SessionReport> replay(const std::function<Result<CaptureContents>(const RecordFn&)>& read,
                             const WindowPolicy& windows, const TimeCut& cut = {}, const ReplayKeeps& keeps = {}) {
  SessionReport r;
  Pipeline pipe;
  pipe.set_windows(windows);
  if (keeps.stream_marks) pipe.analysis().streams.enable();
  uint64_t t0 = 0, lo = 0, hi = UINT64_MAX;
  bool have_t0 = false;
  // Records go through decode -> reorder -> analysis as each chunk is read.
  auto c = read([&](const void* d, size_t n) {
    if (cut.active() && n >= sizeof(st_event_header)) {
      st_event_header h;
      std::memcpy(&h, d, sizeof(h));
      if (!have_t0) {
        have_t0 = true;
        t0 = cut.absolute ? 0 : h.ts_ns;
        lo = t0 + cut.from_ns;
        hi = cut.to_ns == UINT64_MAX ? UINT64_MAX : t0 + cut.to_ns;
      }
      if (h.kind != ST_EV_USER_NOTE && (h.ts_ns < lo || h.ts_ns > hi)) return;
    }
    pipe.push(d, n);
    pipe.advance();
  });
  if (!c) return c.error();
  pipe.flush();
  const auto& m = c->meta;  // an object (read_capture checks)
  r.warnings = c->warnings;
  r.records = pipe.records();
  r.window_start_ns = meta_uint<uint64_t>(m, "window_start_ns", 0, r.warnings);
  r.window_end_ns = std::max(c->window_end_ns.value_or(pipe.newest_ts()), pipe.newest_ts());
  if (cut.active()) {
    r.window_start_ns = std::max(r.window_start_ns, lo);
    r.window_end_ns = std::min(r.window_end_ns, hi);
    if (r.window_end_ns < r.window_start_ns) r.window_end_ns = r.window_start_ns;
  }
  r.decode = pipe.decode_stats();
  r.late_records = pipe.late();
  r.windows = pipe.window_stats();
  r.drops = c->drops;
  r.job = pipe.close(r.window_end_ns, r.drops);
  r.analysis = pipe.take_analysis();
  r.ring_mib = meta_uint<uint32_t>(m, "ring_mib", 0, r.warnings);
  r.drain_ms = meta_uint<uint32_t>(m, "drain_ms", 0, r.warnings);
  r.wall_s = r.window_end_ns > r.window_start_ns ? static_cast<double>(r.window_end_ns - r.window_start_ns) / 1e9 : 0;
  auto meta_str = [&m](const char* key) -> std::string {
    auto it = m.find(key);
    return it != m.end() && it->is_string() ? host_string(utf8_prefix(it->get_ref<const std::string&>(), 256)) : "";
  };
  r.source.host = meta_str("host");
  r.source.kernel = meta_str("kernel");
  r.source.recorded_by = meta_str("steptrace_version");
  r.source.boot_id = meta_str("boot_id");
  if (auto it = m.find("realtime_minus_monotonic_ns"); it != m.end() && it->is_number_integer())
    r.source.realtime_minus_monotonic_ns = it->get<int64_t>();
  if (auto it = m.find("attach_tiers"); it != m.end()) {
    if (it->is_object()) {
      for (auto t = it->begin(); t != it->end(); ++t)
        if (t.value().is_string()) r.tiers.push_back({t.key(), t.value().get<std::string>()});
    } else {
      r.warnings.push_back(fmt::format("capture metadata: \"attach_tiers\" is not an object ({}); ignored",
                                       it->type_name()));
    }
  }
  // How the recording ended: anything but a complete recording marks the report INCOMPLETE.
  if (c->truncated) {
    r.warnings.push_back("capture was cut short (no trailer): drop counters unknown");
    r.capture_end = "cut short: no trailer";
  } else if (!c->end.empty() && c->end != kCaptureComplete) {
    r.capture_end = c->end;
  } else if (c->trailer_records && *c->trailer_records != c->records) {
    r.capture_end = fmt::format("the trailer counts {} records, the file holds {}", *c->trailer_records, c->records);
  }
  mark_capture_end(r);
  mark_window_losses(r);
  return r;
}

}  // namespace

Result<SessionReport> replay_capture(const std::string& path, const WindowPolicy& windows, const TimeCut& cut,
                                     const ReplayKeeps& keeps) {
  return replay([&](const RecordFn& fn) { return read_capture(path, fn); }, windows, cut, keeps);
}

Result<SessionReport> replay_capture_bytes(const uint8_t* data, size_t size) {
  return replay([&](const RecordFn& fn) { return read_capture_bytes(data, size, fn); }, WindowPolicy{});
}

}  // namespace steptrace
