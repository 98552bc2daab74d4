// SPDX-License-Identifier: Apache-2.0
// DeviceSignals: samples the device counters on every drain tick (NDS of
// each traced rank process, EFA port counters, Neuron sysfs metrics at a
// low rate) into SignalsData (signals/signals_data.h). What the samples say
// about the steps is attribution's pass: attribution/device_signal_pass.h.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "signals/counters.h"
#include "signals/signals_data.h"

namespace steptrace::signals {

class DeviceSignals {
 public:
  explicit DeviceSignals(SignalsConfig cfg);
  ~DeviceSignals();
  DeviceSignals(const DeviceSignals&) = delete;
  DeviceSignals& operator=(const DeviceSignals&) = delete;
  // One drain tick: attach new processes, sample what is due. `accel_pids`
  // (a subset of pids: those seen issuing accelerator ioctls) are tried first.
  void tick(uint64_t now_ns, const std::vector<uint32_t>& pids, const std::set<uint32_t>& accel_pids = {});
  // When the next sample is due (CLOCK_MONOTONIC): the caller's next tick
  // should come no later. UINT64_MAX: nothing is sampled on a clock (no
  // datastore attached or being attached, no EFA port, no device); looking
  // for devices then rides on the ticks that come anyway.
  uint64_t next_due_ns() const;
  SignalsData take();
  const SignalsData& data() const { return d_; }
  // A long session folded its steps before ts (pipeline/analysis.h): samples
  // from before then are no longer read, except the last EFA and sysfs sample
  // of each port and device (the counters' values at the window's start).
  // The per-kind cap then bounds a window, not the session.
  void forget_before(uint64_t ts);
  // A recording keeps each sample also for its capture (pipeline/signal_notes.h):
  // take_new() hands over those taken since its last call.
  void keep_new(bool on) { keep_new_ = on; }
  SignalsData take_new();

 private:
  struct Attached {
    int device;
    NdsView view;
    std::map<int, uint64_t> last_seq;  // nc -> inference count
    uint64_t last_ns = 0;
  };
  uint64_t first_scan_ = 0;
  struct Pending {
    uint64_t first_ns = 0, next_ns = 0;
    size_t next_dev = 0;  // a pass over the devices cut short by the bucket resumes here
  };
  // The session's one fd on a device (opened on first use, kept until take()).
  struct DeviceFd {
    int fd = -1;
    uint64_t retry_ns = 0;  // a failed open is retried no sooner than this (UINT64_MAX: never)
  };
  void attach_due(uint64_t now, const std::vector<uint32_t>& pids, const std::set<uint32_t>& accel_pids);
  // false when the bucket ran out before this pid's pass over the devices ended.
  bool try_attach(uint64_t now, uint32_t pid);
  int device_fd(uint64_t now, int idx, const std::string& path);
  void close_devices();
  NdsDeviceOps& ops() { return d_.cfg.ops ? *d_.cfg.ops : system_nds_ops(); }
  void sample_nds(uint64_t now);
  template <typename V, typename T>
  void keep(V& samples, T&& s);
  void note_problem(NdsError e, int err_no);

  std::vector<NdsSample>& fresh_of(std::vector<NdsSample>&) { return fresh_.nds; }
  std::vector<EfaSample>& fresh_of(std::vector<EfaSample>&) { return fresh_.efa; }
  std::vector<SysfsSample>& fresh_of(std::vector<SysfsSample>&) { return fresh_.sysfs; }

  SignalsData d_;
  bool keep_new_ = false;
  SignalsData fresh_;  // samples not yet taken by take_new()
  std::map<uint32_t, Attached> attached_;
  std::map<uint32_t, Pending> pending_;
  std::map<int, DeviceFd> dev_fds_;
  double tokens_ = 0;
  uint64_t tokens_at_ = 0;
  uint32_t rr_next_ = 0;  // round robin: the pid to start from on the next tick
  bool nds_unsupported_ = false;  // the driver answered unsupported / no permission: stop asking
  uint64_t next_efa_ = 0, next_sysfs_ = 0, next_comm_ = 0, next_scan_ = 0;
  uint64_t last_tick_ = 0;
  int problem_rank_ = 0;
};

}  // namespace steptrace::signals
