// SPDX-License-Identifier: Apache-2.0
#include "signals/sampler_thread.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "util/mono_clock.h"

namespace steptrace::signals {

namespace {
// The longest sleep when no sample is due: the device scans (which ride on
// the ticks) then run at least this often, as they did on the daemon's idle
// drain.
constexpr uint64_t kMaxSleepNs = 500'000'000;
}  // namespace

SamplerThread::SamplerThread(SignalsConfig cfg) : signals_(std::move(cfg)), thread_([this] { loop(); }) {}

SamplerThread::~SamplerThread() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SamplerThread::set_pids(std::vector<uint32_t> pids) {
  {
    std::lock_guard lk(mu_);
    if (pids == pids_) return;
    pids_ = std::move(pids);
    pids_changed_ = true;
  }
  wake_.notify_all();
}

SignalsData SamplerThread::snapshot() const {
  std::lock_guard lk(mu_);
  return signals_.data();
}

void SamplerThread::forget_before(uint64_t ts) {
  std::lock_guard lk(mu_);
  signals_.forget_before(ts);
}

uint64_t SamplerThread::ticks() const {
  std::lock_guard lk(mu_);
  return ticks_;
}

void SamplerThread::loop() {
  pthread_setname_np(pthread_self(), "st-counters");
  std::unique_lock lk(mu_);
  while (!stop_) {
    const uint64_t now = monotonic_ns();
    signals_.tick(now, pids_);
    ++ticks_;
    pids_changed_ = false;
    const uint64_t due = std::min(signals_.next_due_ns(), now + kMaxSleepNs);
    const uint64_t wait_ns = due > now ? due - now : 0;
    wake_.wait_for(lk, std::chrono::nanoseconds(wait_ns), [this] { return stop_ || pids_changed_; });
  }
}

}  // namespace steptrace::signals
