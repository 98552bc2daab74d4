// SPDX-License-Identifier: Apache-2.0
// Keeps the kernel ring empty while the drain thread is busy elsewhere.
//
// The drain thread also runs the analysis: every window (10 s) it folds the
// window's steps, about a second of CPU on a busy job here, then hands memory
// back (malloc_trim). Nobody emptied the ring meanwhile: on a 2-vCPU host
// whose job kept both CPUs busy a fold took long enough to fill a 64 MiB ring
// (CI: 12153 records of 23 M dropped in three minutes of compute-bound, 14
// steps merged). Between hold() and release() a second thread drains the ring
// into memory; replay() then hands the records to the usual consumer, in ring
// order, on the drain thread. The reader is only ever used by one thread at a
// time: the drain thread between release() and the next hold().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace steptrace {

class RingReader;

struct RingKeeperStats {
  uint64_t holds = 0;             // times the drain thread was away
  uint64_t records = 0;           // records kept meanwhile (replayed later)
  uint64_t peak_bytes = 0;        // the most kept at once
  uint64_t full = 0;              // drains skipped at max_bytes (the kernel counts what it dropped then)
  uint64_t longest_hold_ns = 0;   // the longest the drain thread was away
};

class RingKeeper {
 public:
  // ring_bytes: the ring's size (one drain takes at most about that much);
  // max_bytes: the most kept in memory at once; interval_ms: the wait
  // between drains of an unhurried ring.
  RingKeeper(RingReader& reader, uint64_t ring_bytes, uint64_t max_bytes, uint32_t interval_ms);
  ~RingKeeper();
  RingKeeper(const RingKeeper&) = delete;
  RingKeeper& operator=(const RingKeeper&) = delete;

  // The drain thread stops draining (a fold begins): the keeper drains.
  void hold();
  // The drain thread drains again: the keeper stops (returns once it has).
  void release();
  // The records kept since the last replay, in ring order, to fn; then forgotten.
  size_t replay(const std::function<void(const void* data, size_t len)>& fn);
  const RingKeeperStats& stats() const { return stats_; }

 private:
  void loop();
  RingReader& reader_;
  const uint64_t ring_bytes_, max_bytes_;
  const uint32_t interval_ms_;
  std::vector<uint8_t> kept_;
  RingKeeperStats stats_;
  uint64_t held_since_ns_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace steptrace
