// SPDX-License-Identifier: Apache-2.0
// Drains the BPF ring buffer on a timer. Records are submitted with
// BPF_RB_NO_WAKEUP, so nothing wakes us per record: the session calls
// drain() every --drain-ms and consumes whatever is there.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "util/result.h"

struct ring_buffer;

namespace steptrace {

class RingReader {
 public:
  using RecordFn = std::function<void(const void* data, size_t len)>;
  static Result<std::unique_ptr<RingReader>> create(int map_fd, RecordFn fn);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Consume everything available now; returns the number of records.
  Result<size_t> drain();

 private:
  RingReader() = default;
  static int on_record(void* ctx, void* data, size_t len);
  ring_buffer* rb_ = nullptr;
  RecordFn fn_;
  size_t count_ = 0;
};

}  // namespace steptrace
