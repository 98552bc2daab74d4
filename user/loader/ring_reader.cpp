// SPDX-License-Identifier: Apache-2.0
#include "loader/ring_reader.h"

#include <bpf/libbpf.h>
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace steptrace {

namespace {
// The smallest record in the ring: the 24-byte header plus the ring's own
// 8-byte header. Consuming ring_bytes / this many records empties a full ring.
constexpr uint64_t kMinRingRecord = 32;
// Returned by the callback to stop ring_buffer__consume at the bound (the
// record it was handed is already consumed: libbpf advances the consumer
// position past a sample before it calls back).
constexpr int kBoundReached = -1000;
}  // namespace

Result<std::unique_ptr<RingReader>> RingReader::create(int map_fd, uint64_t ring_bytes, RecordFn fn) {
  std::unique_ptr<RingReader> r(new RingReader());
  r->fn_ = std::move(fn);
  r->limit_ = static_cast<size_t>(std::max<uint64_t>(4096, ring_bytes / kMinRingRecord));
  r->rb_ = ring_buffer__new(map_fd, &RingReader::on_record, r.get(), nullptr);
  if (!r->rb_) return make_error(fmt::format("cannot map the ring buffer: {}", std::strerror(errno)));
  return r;
}

RingReader::~RingReader() { ring_buffer__free(rb_); }

int RingReader::on_record(void* ctx, void* data, size_t len) {
  auto* self = static_cast<RingReader*>(ctx);
  if (std::vector<uint8_t>* into = self->divert_) {
    const auto n = static_cast<uint32_t>(len);
    const size_t at = into->size();
    into->resize(at + sizeof(uint64_t) + ((len + 7) & ~size_t{7}));
    std::memcpy(into->data() + at, &n, sizeof(n));
    std::memcpy(into->data() + at + sizeof(uint64_t), data, len);
  } else {
    self->fn_(data, len);
  }
  return ++self->count_ >= self->limit_ ? kBoundReached : 0;
}

Result<size_t> RingReader::drain() {
  count_ = 0;
  int n = ring_buffer__consume(rb_);
  more_ = n == kBoundReached;
  if (n < 0 && n != -EINTR && !more_)
    return make_error(fmt::format("ring buffer read failed: {}", std::strerror(-n)));
  return count_;
}

}  // namespace steptrace
