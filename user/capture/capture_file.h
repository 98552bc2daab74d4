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
//   trailer       "STTR" | u32 len | JSON (drop counters, the records written,
//                 window end, "end": how the recording ended)
// A crash leaves a readable prefix: every complete chunk stands alone. A
// recording stopped by --max-size or a failed write is cut back to its last
// complete chunk and still gets its trailer, which says so in "end".
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "capture/drop_stats.h"
#include "util/result.h"

namespace steptrace {

// The trailer's "end" field is optional (captures written before it read as
// "complete"), so the format version stays 1.
inline constexpr uint32_t kCaptureFormatVersion = 1;
// The trailer's "end" of a recording that ran to its end (-d, the job exited, Ctrl-C).
inline constexpr std::string_view kCaptureComplete = "complete";

struct CaptureWriterOptions {
  uint64_t max_bytes = 0;  // 0: no cap; else the whole file, trailer included, stays at or under it
  bool overwrite = false;  // replace an existing file at the path (record --force)
};

// Refuses a path that exists (unless overwrite) or is a directory: checked by
// `record` before tracing starts, and again by create() and close().
Status check_capture_path(const std::string& path, bool overwrite);

class CaptureWriter {
 public:
  // Writes to PATH.tmp (mode 0600, O_EXCL|O_NOFOLLOW) and renames on close().
  static Result<std::unique_ptr<CaptureWriter>> create(const std::string& path, const nlohmann::json& meta,
                                                       const CaptureWriterOptions& opt = {});
  ~CaptureWriter();
  // Buffers a record; a full chunk is compressed and written. When the next
  // chunk would pass max_bytes, or a write fails (ENOSPC, EIO...), the writer
  // stops: the file is cut back to its last complete chunk, and this and every
  // later append return an Error naming the reason (end_reason() has it too).
  Status append(const void* rec, size_t len);
  Status flush_chunk();
  // Writes the trailer (drop counters, the records really written, the window
  // end, and how the recording ended: end_reason() when the writer stopped
  // itself, else `how_ended`), fsyncs, and renames the temp file into place.
  // The file is renamed even when the trailer cannot be written (it is then a
  // readable prefix); the Error says so.
  Status close(const DropStats& drops, uint64_t window_end_ns, std::string_view how_ended = kCaptureComplete);

  bool stopped() const { return !end_reason_.empty(); }
  // "max_size" or "write_error: <strerror>" once stopped; empty before.
  const std::string& end_reason() const { return end_reason_; }
  uint64_t records_written() const { return records_written_; }
  uint64_t bytes_written() const { return committed_; }

 private:
  CaptureWriter() = default;
  int write_all(const void* p, size_t n);  // 0 or errno
  // Preallocates [committed_, committed_ + n): 0, or errno (EOPNOTSUPP turns reserving off).
  int reserve(uint64_t n);
  void cut_back();  // truncate to committed_ and write from there
  Error stop(std::string reason, std::string message);
  std::string path_, tmp_path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
  uint64_t buffered_records_ = 0;  // in buf_, not yet written
  uint64_t records_written_ = 0;   // in complete chunks on disk
  uint64_t committed_ = 0;         // file bytes up to the end of the last complete chunk
  uint64_t header_bytes_ = 0;      // of which the header
  uint64_t max_bytes_ = 0;
  bool overwrite_ = false;
  bool can_reserve_ = true;
  bool closed_ = false;
  std::string end_reason_, stop_message_;
};

struct CaptureContents {
  nlohmann::json meta;     // always a JSON object
  nlohmann::json trailer;  // null when the file was cut short (crash)
  DropStats drops;
  uint64_t records = 0;
  bool truncated = false;  // no trailer: a readable prefix of an interrupted recording
  // The trailer's "end": "complete", "max_size", "write_error: ...",
  // "signal SIGHUP"...; empty for captures written before the field existed
  // and for truncated ones.
  std::string end;
  std::optional<uint64_t> trailer_records;  // the record count the trailer states
  std::optional<uint64_t> window_end_ns;    // from the trailer
  // Trailer fields of the wrong JSON type, ignored (one sentence each).
  std::vector<std::string> warnings;
};

// Streams every record to `fn` as its chunk is read (memory stays bounded by
// one chunk, whatever the file size). Corrupt, foreign, newer or truncated-mid-chunk
// files return an Error naming the byte offset and the reason.
Result<CaptureContents> read_capture(const std::string& path,
                                     const std::function<void(const void*, size_t)>& fn);
// Same, over bytes in memory (used by the fuzzer).
Result<CaptureContents> read_capture_bytes(const uint8_t* data, size_t size,
                                           const std::function<void(const void*, size_t)>& fn);

}  // namespace steptrace
