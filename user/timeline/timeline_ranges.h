// SPDX-License-Identifier: Apache-2.0
// Range queries on a finished ThreadTimeline (TimelineStore::finish sorts
// its spans by start; segments are contiguous and in time order; block
// requests are in completion order). Attribution asks "what overlaps this
// step" once per step: a search, not a scan of the whole timeline, keeps the
// cost per step independent of how much timeline is held.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "timeline/timeline_store.h"

namespace steptrace {

// The first segment that ends after ts.
inline TimelineVector<StateSeg>::const_iterator segs_ending_after(const ThreadTimeline& t, uint64_t ts) {
  return std::partition_point(t.segs.begin(), t.segs.end(), [ts](const StateSeg& g) { return g.end <= ts; });
}

// The first segment that starts at or after ts.
inline TimelineVector<StateSeg>::const_iterator segs_starting_from(const ThreadTimeline& t, uint64_t ts) {
  return std::partition_point(t.segs.begin(), t.segs.end(), [ts](const StateSeg& g) { return g.start < ts; });
}

// The first span that starts at or after ts.
inline TimelineVector<Span>::const_iterator spans_starting_from(const ThreadTimeline& t, uint64_t ts) {
  return std::partition_point(t.spans.begin(), t.spans.end(), [ts](const Span& s) { return s.start < ts; });
}

// The first span that can overlap [ts, ...): none that starts earlier lasts long enough.
inline TimelineVector<Span>::const_iterator spans_overlapping_from(const ThreadTimeline& t, uint64_t ts) {
  return spans_starting_from(t, ts > t.max_span_ns ? ts - t.max_span_ns : 0);
}

// The first block request that completes after ts.
inline TimelineVector<BlockIo>::const_iterator block_ending_after(const ThreadTimeline& t, uint64_t ts) {
  return std::partition_point(t.block.begin(), t.block.end(), [ts](const BlockIo& b) { return b.end <= ts; });
}

}  // namespace steptrace
