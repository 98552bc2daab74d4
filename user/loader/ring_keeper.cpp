// SPDX-License-Identifier: Apache-2.0
#include "loader/ring_keeper.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "loader/ring_reader.h"
#include "util/mono_clock.h"

namespace steptrace {

RingKeeper::RingKeeper(RingReader& reader, uint64_t ring_bytes, uint64_t max_bytes, uint32_t interval_ms)
    : reader_(reader), ring_bytes_(ring_bytes), max_bytes_(max_bytes), interval_ms_(std::max<uint32_t>(1, interval_ms)) {}

RingKeeper::~RingKeeper() { release(); }

void RingKeeper::hold() {
  if (thread_.joinable()) return;
  held_since_ns_ = monotonic_ns();
  ++stats_.holds;
  stop_ = false;
  reader_.divert(&kept_);
  thread_ = std::thread([this] { loop(); });
}

void RingKeeper::release() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  reader_.divert(nullptr);
  stats_.longest_hold_ns = std::max(stats_.longest_hold_ns, monotonic_ns() - held_since_ns_);
  stats_.peak_bytes = std::max<uint64_t>(stats_.peak_bytes, kept_.size());
}

void RingKeeper::loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    // One drain takes at most a ring's worth of the smallest records (each
    // kept with an 8-byte length): past max_bytes the ring is left to fill,
    // and the kernel counts what it then drops.
    const bool room = kept_.size() + 2 * ring_bytes_ <= max_bytes_;
    if (room)
      (void)reader_.drain();  // an error comes back to the drain thread's next drain
    else
      ++stats_.full;
    l.lock();
    if (room && reader_.more()) continue;  // cut at its bound: go on at once
    cv_.wait_for(l, std::chrono::milliseconds(interval_ms_), [this] { return stop_; });
  }
}

size_t RingKeeper::replay(const std::function<void(const void* data, size_t len)>& fn) {
  if (thread_.joinable()) return 0;  // still held: the keeper owns the buffer
  size_t n = 0;
  for (size_t at = 0; at + sizeof(uint64_t) <= kept_.size(); ++n) {
    uint32_t len = 0;
    std::memcpy(&len, kept_.data() + at, sizeof(len));
    fn(kept_.data() + at + sizeof(uint64_t), len);
    at += sizeof(uint64_t) + ((static_cast<size_t>(len) + 7) & ~size_t{7});
  }
  stats_.records += n;
  kept_.clear();
  if (kept_.capacity() > ring_bytes_) kept_.shrink_to_fit();  // a rare long hold does not pin its peak
  return n;
}

}  // namespace steptrace
