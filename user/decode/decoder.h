// SPDX-License-Identifier: Apache-2.0
// Raw ring-buffer/capture bytes -> Event. Validates size and kind; a record
// of an unknown kind or a wrong size is counted and skipped, never fatal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "decode/event.h"

namespace steptrace {

struct DecodeStats {
  uint64_t decoded[ST_EV_KIND_MAX] = {};
  uint64_t unknown_kind = 0;
  uint64_t bad_size = 0;
  uint64_t total_decoded() const;
};

class Decoder {
 public:
  std::optional<Event> decode(const void* data, size_t len);
  const DecodeStats& stats() const { return stats_; }
  // A record decoded outside the Event path (stack samples): counted here,
  // as decoded or as malformed, so the totals stay one place.
  void count(uint16_t kind, bool ok) {
    if (!ok) ++stats_.bad_size;
    else if (kind < ST_EV_KIND_MAX) ++stats_.decoded[kind];
  }

 private:
  DecodeStats stats_;
};

}  // namespace steptrace
