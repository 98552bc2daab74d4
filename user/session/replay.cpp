// SPDX-License-Identifier: Apache-2.0
#include "capture/capture_file.h"
#include "capture/reorder.h"
#include "decode/decoder.h"
#include "session/session.h"

namespace steptrace {

Result<SessionReport> replay_capture(const std::string& path) {
  SessionReport r;
  Decoder decoder;
  Reorderer reorder;
  uint64_t last_ts = 0;
  auto c = read_capture(path, [&](const void* d, size_t n) {
    ++r.records;
    if (auto ev = decoder.decode(d, n)) {
      last_ts = std::max<uint64_t>(last_ts, header_of(*ev).ts_ns);
      reorder.push(*ev);
      reorder.release([&](const Event& e) { r.analysis.on_event(e); });
    }
  });
  if (!c) return c.error();
  reorder.flush([&](const Event& e) { r.analysis.on_event(e); });
  const auto& m = c->meta;
  r.window_start_ns = m.value("window_start_ns", uint64_t{0});
  r.window_end_ns = c->trailer.is_object() ? c->trailer.value("window_end_ns", last_ts) : last_ts;
  if (r.window_end_ns < last_ts) r.window_end_ns = last_ts;
  r.decode = decoder.stats();
  r.late_records = reorder.late();
  r.drops = c->drops;
  r.job = r.analysis.finish(r.window_end_ns, r.drops);
  r.ring_mib = m.value("ring_mib", 0u);
  r.drain_ms = m.value("drain_ms", 0u);
  r.wall_s = r.window_end_ns > r.window_start_ns ? static_cast<double>(r.window_end_ns - r.window_start_ns) / 1e9 : 0;
  if (m.contains("attach_tiers") && m["attach_tiers"].is_object())
    for (auto it = m["attach_tiers"].begin(); it != m["attach_tiers"].end(); ++it)
      if (it.value().is_string()) r.tiers.push_back({it.key(), it.value().get<std::string>()});
  if (c->truncated) r.warnings.push_back("capture was cut short (no trailer): drop counters unknown");
  return r;
}

}  // namespace steptrace
