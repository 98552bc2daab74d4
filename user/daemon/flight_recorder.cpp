// SPDX-License-Identifier: Apache-2.0
#include "daemon/flight_recorder.h"

#include <cstring>

#include "capture/capture_file.h"

namespace steptrace::daemon {

void FlightRecorder::configure(uint64_t keep_ns, uint64_t max_bytes) {
  keep_ns_ = keep_ns;
  max_bytes_ = max_bytes;
  while (!blocks_.empty() && bytes_ > max_bytes_) drop_front();
}

void FlightRecorder::drop_front() {
  bytes_ -= blocks_.front().data.capacity();
  records_ -= blocks_.front().records;
  evicted_ += blocks_.front().records;
  blocks_.pop_front();
}

void FlightRecorder::append(uint64_t ts_ns, const void* rec, size_t len) {
  if (keep_ns_ == 0 || max_bytes_ < kBlockBytes || len + 4 > kBlockBytes) return;
  if (blocks_.empty() || blocks_.back().data.size() + 4 + len > kBlockBytes) {
    while (!blocks_.empty() && bytes_ + kBlockBytes > max_bytes_) drop_front();
    blocks_.emplace_back();
    blocks_.back().data.reserve(kBlockBytes);
    bytes_ += blocks_.back().data.capacity();
  }
  Block& b = blocks_.back();
  uint32_t l = static_cast<uint32_t>(len);
  size_t off = b.data.size();
  b.data.resize(off + 4 + len);
  std::memcpy(b.data.data() + off, &l, 4);
  std::memcpy(b.data.data() + off + 4, rec, len);
  b.last_ts = std::max(b.last_ts, ts_ns);
  ++b.records;
  ++records_;
}

void FlightRecorder::evict(uint64_t now_ns) {
  // Keep the newest block even when it is old: it is still being filled.
  while (blocks_.size() > 1 && blocks_.front().last_ts + keep_ns_ < now_ns) drop_front();
  if (keep_ns_ == 0) {
    while (!blocks_.empty()) drop_front();
  }
}

FlightSnapshot FlightRecorder::snapshot() const {
  FlightSnapshot s;
  s.blocks.reserve(blocks_.size());
  for (const auto& b : blocks_) s.blocks.push_back(b.data);
  s.records = records_;
  return s;
}

Status FlightRecorder::dump(const std::string& path, const nlohmann::json& meta, const DropStats& drops,
                            uint64_t end_ns) const {
  return write_capture(path, snapshot(), meta, drops, end_ns);
}

Status FlightRecorder::write_capture(const std::string& path, const FlightSnapshot& s, const nlohmann::json& meta,
                                     const DropStats& drops, uint64_t end_ns,
                                     const std::vector<std::vector<uint8_t>>& head,
                                     const std::vector<std::vector<uint8_t>>& tail) {
  auto w = CaptureWriter::create(path, meta);
  if (!w) return w.error();
  auto notes = [&w, &drops, end_ns](const std::vector<std::vector<uint8_t>>& records) -> Status {
    for (const auto& r : records)
      if (auto st = (*w)->append(r.data(), r.size()); !st) {
        (void)(*w)->close(drops, end_ns);
        return st;
      }
    return Ok{};
  };
  if (auto st = notes(head); !st) return st;
  for (const auto& data : s.blocks) {
    size_t off = 0;
    while (off + 4 <= data.size()) {
      uint32_t l;
      std::memcpy(&l, data.data() + off, 4);
      if (auto st = (*w)->append(data.data() + off + 4, l); !st) {
        // A full disk: keep what was written, with its trailer, and report the failure.
        (void)(*w)->close(drops, end_ns);
        return st;
      }
      off += 4 + l;
    }
  }
  if (auto st = notes(tail); !st) return st;
  return (*w)->close(drops, end_ns);
}

}  // namespace steptrace::daemon
