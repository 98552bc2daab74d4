// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: capture bytes through everything `steptrace report FILE
// [--json -] [--perfetto F] [--html F]` does with them: the reader, replay
// (decode -> reorder -> analysis: threads, timeline, steps, attribution,
// verdict) and every sink (terminal text, JSON summary, Perfetto, HTML).
//
// Two input forms:
//   a capture file ("STEPTRCE..."): replayed as it is, the reader's checks
//   included (corpus: tests/corpus/capture, tests/fixtures/straggler.cap);
//   anything else: METADATA '\n' RECORDS, where RECORDS is a chunk's raw
//   content (u32 length + record, repeated). It is wrapped here into a valid
//   capture (compressed, checksummed, with a trailer), so mutations of the
//   records and of the metadata reach the decoder, the analysis and the sinks
//   instead of stopping at a chunk checksum (corpus: tests/corpus/report).
// Build and run with tools/fuzz/run-report.sh (clang, -fsanitize=fuzzer).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "capture/capture_file.h"
#include "export/html_report.h"
#include "export/perfetto.h"
#include "export/text_report.h"
#include "export/summary.h"
#include "pipeline/replay.h"
#include "steptrace_abi.h"

namespace {

void put_u32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

void put_bytes(std::vector<uint8_t>& v, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  v.insert(v.end(), b, b + n);
}

// METADATA '\n' RECORDS -> a capture file in memory. The trailer's drop
// counters come from the first record bytes, so both complete and INCOMPLETE
// reports are reached.
std::vector<uint8_t> wrap(const uint8_t* data, size_t size) {
  const auto* nl = static_cast<const uint8_t*>(std::memchr(data, '\n', size));
  size_t mlen = nl ? static_cast<size_t>(nl - data) : 0;
  const uint8_t* raw = nl ? nl + 1 : data;
  size_t rlen = size - (raw - data);
  std::vector<uint8_t> out;
  put_bytes(out, "STEPTRCE", 8);
  put_u32(out, steptrace::kCaptureFormatVersion);
  put_u32(out, ST_ABI_VERSION);
  put_u32(out, static_cast<uint32_t>(mlen));
  put_bytes(out, data, mlen);
  if (rlen > 0) {
    uLongf zlen = compressBound(static_cast<uLong>(rlen));
    std::vector<uint8_t> z(zlen);
    if (compress2(z.data(), &zlen, raw, static_cast<uLong>(rlen), Z_BEST_SPEED) != Z_OK) __builtin_trap();
    put_bytes(out, "STCK", 4);
    put_u32(out, static_cast<uint32_t>(rlen));
    put_u32(out, static_cast<uint32_t>(zlen));
    put_u32(out, static_cast<uint32_t>(crc32(0, raw, static_cast<uInt>(rlen))));
    put_bytes(out, z.data(), zlen);
  }
  uint64_t dropped = rlen > 0 && (raw[0] & 1) ? raw[0] : 0;
  std::string t = "{\"emitted\":[0,1000],\"dropped\":[0," + std::to_string(dropped) + "],\"end\":\"" +
                  (dropped ? "write_error: No space left on device" : "complete") + "\"}";
  put_bytes(out, "STTR", 4);
  put_u32(out, static_cast<uint32_t>(t.size()));
  put_bytes(out, t.data(), t.size());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace steptrace;
  std::vector<uint8_t> wrapped;
  if (size < 8 || std::memcmp(data, "STEPTRCE", 8) != 0) {
    wrapped = wrap(data, size);
    data = wrapped.data();
    size = wrapped.size();
  }
  auto r = replay_capture_bytes(data, size);
  if (!r) {
    if (r.error().message.empty() || r.error().message.find('\n') != std::string::npos)
      __builtin_trap();  // every failure is one line with a reason
    return 0;
  }
  // The calls main.cpp and export/outputs.cpp make, in every style.
  std::string text = format_report_text(*r, {false, 0});
  std::string vtext = format_report_text(*r, {true, 1});
  std::string json = summary_json(*r).dump(2);
  std::string perfetto = perfetto_trace(*r).dump();
  std::string html = html_report(*r);
  // What the reader promises: an INCOMPLETE capture is said so in every output.
  if (text.find("VERDICT") == std::string::npos) __builtin_trap();
  if (r->incomplete() && (text.find("INCOMPLETE") == std::string::npos ||
                          json.find("\"incomplete\": true") == std::string::npos))
    __builtin_trap();
  if (!r->capture_end.empty() && (html.find("capture-end") == std::string::npos ||
                                  text.find("the capture ended early") == std::string::npos))
    __builtin_trap();
  return 0;
}
