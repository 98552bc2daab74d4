// SPDX-License-Identifier: Apache-2.0
// How long the consumer sleeps between ring drains.
//
// Records are submitted without a wake-up, so a busy session drains on a
// timer (--drain-ms) and never pays a wake-up per record. When drains keep
// finding nothing for a second, the sleep grows to the idle interval: before it, the
// caller raises the BPF side's idle flag (st_consumer_idle), and the first
// record after that wakes the consumer at once (BPF_RB_FORCE_WAKEUP) and puts
// it back on the timer. An idle job then costs a wake-up per idle interval
// instead of one per --drain-ms.
//
// Device files named on the command line that have not appeared yet wake the
// sleep too, instead of being looked for every millisecond: inotify on each
// one's directory (a device node created) and the mount table (a simulated
// device's file system mounted). Anything these miss (a file that appears
// inside an already mounted FUSE tree) is still found at the next drain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace {

// The idle interval of sessions and the daemon: an attached, sleeping job costs
// one wake-up per this many ms (a -d end or a stop is still kept on time).
inline constexpr uint32_t kIdleDrainMs = 500;
// How long drains must find nothing before the sleep grows: a job between
// two bursts of a step is not idle. (The device counters keep their own
// clock: the caller's deadline, signals::DeviceSignals::next_due_ns.)
inline constexpr uint32_t kIdleAfterMs = 1000;

class DrainWait {
 public:
  // ring_fd: the ring buffer map (readable on a forced wake-up).
  static Result<std::unique_ptr<DrainWait>> create(int ring_fd, uint32_t drain_ms, uint32_t idle_ms,
                                                   uint32_t idle_after_ms = kIdleAfterMs);
  ~DrainWait();
  DrainWait(const DrainWait&) = delete;
  DrainWait& operator=(const DrainWait&) = delete;

  // Wake when one of these paths may have appeared. Idempotent; an empty
  // list stops watching.
  void watch_paths(const std::vector<std::string>& paths);

  // After a drain that consumed `records`: whether the next sleep is the idle
  // one (the last three drains and idle_after_ms found nothing). The caller then raises the
  // BPF idle flag and drains once more (a record that came between the last
  // drain and the flag woke nobody) before it calls sleep().
  bool next_is_idle(size_t records);
  // Sleep the drain interval, or the idle interval after next_is_idle();
  // never past deadline_ns (CLOCK_MONOTONIC; 0 = none). Returns early on a
  // forced wake-up, a watched path's change or a signal.
  void sleep(uint64_t deadline_ns);

  // A new drain interval (the daemon's degradation levels); the idle one stays
  // at least as long.
  void set_drain_ms(uint32_t ms) {
    drain_ms_ = ms < 1 ? 1 : ms;
    if (idle_ms_ < drain_ms_) idle_ms_ = drain_ms_;
  }
  uint32_t idle_ms() const { return idle_ms_; }
  uint64_t idle_sleeps() const { return idle_sleeps_; }  // for tests and -v

 private:
  DrainWait() = default;
  void drain_events();
  int ep_ = -1, inotify_ = -1, mounts_ = -1;
  uint32_t drain_ms_ = 10, idle_ms_ = 200;
  int empty_drains_ = 0;
  bool idle_next_ = false;
  uint64_t idle_sleeps_ = 0;
  uint64_t idle_after_ns_ = 0, last_busy_ns_ = 0;
  std::vector<std::string> watched_;
};

}  // namespace steptrace
