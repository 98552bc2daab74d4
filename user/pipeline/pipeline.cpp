// SPDX-License-Identifier: Apache-2.0
#include "pipeline/pipeline.h"

#include <algorithm>
#include <cstring>

namespace steptrace {

void Pipeline::push(const void* data, size_t len) {
  ++records_;
  ++window_records_;
  if (observer_ && len >= sizeof(st_event_header)) {
    st_event_header h;
    std::memcpy(&h, data, sizeof(h));
    observer_(h, data, len);
  }
  if (auto ev = decoder_.decode(data, len)) {
    newest_ts_ = std::max<uint64_t>(newest_ts_, header_of(*ev).ts_ns);
    reorder_.push(*ev);
  }
}

void Pipeline::advance() {
  reorder_.release([this](const Event& e) { analysis_.on_event(e); });
}

void Pipeline::flush() {
  reorder_.flush([this](const Event& e) { analysis_.on_event(e); });
}

void Pipeline::name_threads(const SysRoot& root) {
  for (const auto& [tid, t] : analysis_.threads.threads())
    if (t.comm.empty())
      if (auto c = root.thread_comm(t.pid, tid)) analysis_.threads.set_comm(t.pid, tid, *c);
}

JobAnalysis Pipeline::close_window(uint64_t end_ns, const DropStats& drops) {
  JobAnalysis ja = analysis_.finish(end_ns, drops);
  start_window();
  return ja;
}

void Pipeline::start_window() {
  const auto* signals = analysis_.device_signals;
  analysis_ = Analysis();
  analysis_.device_signals = signals;
  window_records_ = 0;
}

void Pipeline::restart() {
  flush();
  late_base_ += reorder_.late();
  const DecodeStats& d = decoder_.stats();
  for (size_t k = 0; k < ST_EV_KIND_MAX; ++k) decode_base_.decoded[k] += d.decoded[k];
  decode_base_.unknown_kind += d.unknown_kind;
  decode_base_.bad_size += d.bad_size;
  decoder_ = Decoder();
  reorder_ = Reorderer();
}

DecodeStats Pipeline::decode_stats() const {
  DecodeStats s = decode_base_;
  const DecodeStats& d = decoder_.stats();
  for (size_t k = 0; k < ST_EV_KIND_MAX; ++k) s.decoded[k] += d.decoded[k];
  s.unknown_kind += d.unknown_kind;
  s.bad_size += d.bad_size;
  return s;
}

}  // namespace steptrace
