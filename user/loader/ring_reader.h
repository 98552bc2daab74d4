// SPDX-License-Identifier: Apache-2.0
// Drains the BPF ring buffer on a timer. Records are submitted with
// BPF_RB_NO_WAKEUP, so nothing wakes us per record: the session calls
// drain() every --drain-ms and consumes whatever is there.
//
// One drain() consumes at most one ring's worth of records (ring bytes / the
// smallest record): libbpf's ring_buffer__consume keeps going while the
// producer keeps adding, so under an event storm that outruns the consumer
// it would never return, and a stop, -d or a window close would never be
// seen. more() says the call was cut short: call again without sleeping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "util/result.h"

struct ring_buffer;

namespace steptrace {

class RingReader {
 public:
  using RecordFn = std::function<void(const void* data, size_t len)>;
  static Result<std::unique_ptr<RingReader>> create(int map_fd, uint64_t ring_bytes, RecordFn fn);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Consume what is available now, at most one ring's worth; returns the number of records.
  Result<size_t> drain();
  // The last drain() stopped at its bound with records still waiting.
  bool more() const { return more_; }
  size_t limit() const { return limit_; }
  void set_limit(size_t records) { limit_ = records > 0 ? records : 1; }  // tests shrink the bound
  // While set, drain() appends each record to `into` (a u32 length, then its
  // bytes, padded to 8) instead of calling back: RingKeeper empties the ring
  // from another thread while the callback's consumer is busy.
  void divert(std::vector<uint8_t>* into) { divert_ = into; }

 private:
  RingReader() = default;
  static int on_record(void* ctx, void* data, size_t len);
  ring_buffer* rb_ = nullptr;
  RecordFn fn_;
  std::vector<uint8_t>* divert_ = nullptr;
  size_t count_ = 0;
  size_t limit_ = 0;
  bool more_ = false;
};

}  // namespace steptrace
