// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the capture reader and the record decoder, which see
// whatever bytes `steptrace report FILE` is given. Build and run with
// tools/fuzz/run.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>

#include "capture/capture_file.h"
#include "decode/decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  steptrace::Decoder decoder;
  uint64_t n = 0;
  auto r = steptrace::read_capture_bytes(data, size, [&](const void* rec, size_t len) {
    ++n;
    (void)decoder.decode(rec, len);
  });
  if (r) {
    // A readable file names how many records it streamed; they must agree.
    if (r->records != n) __builtin_trap();
  } else if (r.error().message.empty()) {
    __builtin_trap();  // every failure carries a reason
  }
  return 0;
}
