// SPDX-License-Identifier: Apache-2.0
// Flight recorder: the last N seconds of raw ring-buffer records, kept in
// fixed-size blocks so memory is bounded by max_bytes whatever the event
// rate (oldest blocks go first: by age, then by the byte cap). A dump writes
// them as a capture file (the `record` format) that `steptrace report` reads:
// the daemon copies them (snapshot(), on the main thread, a memcpy of at most
// the cap) and compresses the copy on its dump worker (write_capture()).
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capture/drop_stats.h"
#include "util/result.h"

namespace steptrace::daemon {

// A copy of the held records, detached from the recorder.
struct FlightSnapshot {
  std::vector<std::vector<uint8_t>> blocks;  // [u32 len][record]...
  uint64_t records = 0;
};

class FlightRecorder {
 public:
  FlightRecorder(uint64_t keep_ns, uint64_t max_bytes) { configure(keep_ns, max_bytes); }
  void configure(uint64_t keep_ns, uint64_t max_bytes);

  // `ts_ns` is the record's timestamp (or now); records are kept in arrival order.
  void append(uint64_t ts_ns, const void* rec, size_t len);
  void evict(uint64_t now_ns);

  uint64_t bytes() const { return bytes_; }        // payload held now (including block slack)
  uint64_t records() const { return records_; }
  uint64_t evicted_records() const { return evicted_; }

  // Writes every held record to `path` (0600, never through a symlink).
  Status dump(const std::string& path, const nlohmann::json& meta, const DropStats& drops, uint64_t end_ns) const;
  FlightSnapshot snapshot() const;
  // What dump() does, from a snapshot (any thread); `head` and `tail`
  // records (user notes) go before and after the snapshot's.
  static Status write_capture(const std::string& path, const FlightSnapshot& s, const nlohmann::json& meta,
                              const DropStats& drops, uint64_t end_ns,
                              const std::vector<std::vector<uint8_t>>& head = {},
                              const std::vector<std::vector<uint8_t>>& tail = {});

  static constexpr size_t kBlockBytes = 256 << 10;

 private:
  struct Block {
    std::vector<uint8_t> data;  // [u32 len][record]...
    uint64_t last_ts = 0;
    uint32_t records = 0;
  };
  std::deque<Block> blocks_;
  uint64_t keep_ns_ = 0, max_bytes_ = 0, bytes_ = 0, records_ = 0, evicted_ = 0;
  void drop_front();
};

}  // namespace steptrace::daemon
