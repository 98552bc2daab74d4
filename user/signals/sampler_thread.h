// SPDX-License-Identifier: Apache-2.0
// The device sampler (signals/device_signals.h) on a thread of its own, for
// a consumer that cannot tick it often enough: the daemon, whose window
// analysis holds its main thread for longer than a step (seconds of a
// sanitizer build's time on this VM). A datastore's words describe only the
// last execution, so every execution ended while nobody ticked is lost.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "signals/device_signals.h"

namespace steptrace::signals {

class SamplerThread {
 public:
  explicit SamplerThread(SignalsConfig cfg);
  ~SamplerThread();  // stops and joins
  SamplerThread(const SamplerThread&) = delete;
  SamplerThread& operator=(const SamplerThread&) = delete;
  // The processes to attach and read (those that hold an accelerator). A
  // change wakes the thread, so a new rank's datastore is looked for at once.
  void set_pids(std::vector<uint32_t> pids);
  // A copy of what was sampled, taken between two ticks.
  SignalsData snapshot() const;
  // DeviceSignals::forget_before, between two ticks.
  void forget_before(uint64_t ts);
  uint64_t ticks() const;

 private:
  void loop();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  DeviceSignals signals_;
  std::vector<uint32_t> pids_;
  bool pids_changed_ = false, stop_ = false;
  uint64_t ticks_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace steptrace::signals
