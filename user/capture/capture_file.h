// SPDX-License-Identifier: Apache-2.0
// Capture files: what `steptrace record` writes and `steptrace report` (and
// the unit tests' fixtures) replay through the same analysis.
//
// Layout (little-endian):
//   file header   "STEPTRCE" | u32 format_version | u32 abi_version |
//                 u32 meta_len | meta (JSON: host, kernel, config, clocks)
//   chunk*        "STCK" | u32 raw_len | u32 zlen | u32 crc32(raw) | zlib(raw)
//                 raw = records exactly as the ring buffer produced them,
//                 each prefixed by u32 length
//   trailer       "STTR" | u32 len | JSON (drop counters, record count)
// A crash leaves a readable prefix: every complete chunk stands alone.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loader/tracer.h"
#include "util/result.h"

namespace steptrace {

inline constexpr uint32_t kCaptureFormatVersion = 1;

class CaptureWriter {
 public:
  // Writes to PATH.tmp (mode 0600, O_EXCL|O_NOFOLLOW) and renames on close().
  static Result<std::unique_ptr<CaptureWriter>> create(const std::string& path, const nlohmann::json& meta);
  ~CaptureWriter();
  Status append(const void* rec, size_t len);
  Status flush_chunk();
  // Writes the trailer, fsyncs and renames the temp file into place.
  Status close(const DropStats& drops, uint64_t records, uint64_t window_end_ns);

 private:
  CaptureWriter() = default;
  Status write_all(const void* p, size_t n);
  std::string path_, tmp_path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
  bool closed_ = false;
};

struct CaptureContents {
  nlohmann::json meta;
  nlohmann::json trailer;  // null when the file was cut short (crash)
  DropStats drops;
  uint64_t records = 0;
  bool truncated = false;  // no trailer: a readable prefix of an interrupted recording
};

// Streams every record to `fn`. Corrupt, foreign, newer or truncated-mid-chunk
// files return an Error naming the byte offset and the reason.
Result<CaptureContents> read_capture(const std::string& path,
                                     const std::function<void(const void*, size_t)>& fn);
// Same, over bytes in memory (used by the fuzzer).
Result<CaptureContents> read_capture_bytes(const uint8_t* data, size_t size,
                                           const std::function<void(const void*, size_t)>& fn);

}  // namespace steptrace
