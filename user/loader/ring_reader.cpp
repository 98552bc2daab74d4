// SPDX-License-Identifier: Apache-2.0
#include "loader/ring_reader.h"

#include <bpf/libbpf.h>
#include <fmt/core.h>

#include <cerrno>
#include <cstring>

namespace steptrace {

Result<std::unique_ptr<RingReader>> RingReader::create(int map_fd, RecordFn fn) {
  std::unique_ptr<RingReader> r(new RingReader());
  r->fn_ = std::move(fn);
  r->rb_ = ring_buffer__new(map_fd, &RingReader::on_record, r.get(), nullptr);
  if (!r->rb_) return make_error(fmt::format("cannot map the ring buffer: {}", std::strerror(errno)));
  return r;
}

RingReader::~RingReader() { ring_buffer__free(rb_); }

int RingReader::on_record(void* ctx, void* data, size_t len) {
  auto* self = static_cast<RingReader*>(ctx);
  self->fn_(data, len);
  ++self->count_;
  return 0;
}

Result<size_t> RingReader::drain() {
  count_ = 0;
  int n = ring_buffer__consume(rb_);
  if (n < 0 && n != -EINTR) return make_error(fmt::format("ring buffer read failed: {}", std::strerror(-n)));
  return count_;
}

}  // namespace steptrace
