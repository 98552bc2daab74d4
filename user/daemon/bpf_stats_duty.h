// SPDX-License-Identifier: Apache-2.0
// BPF run-time statistics for the daemon's CPU budget, on one second in N.
//
// While they are on, the kernel reads the clock twice around every run of
// every BPF program on the host: +84..125 ns on each hooked syscall of every
// process on a 2-vCPU VM (docs/performance.md, the daemon's budget, lever 3),
// more than steptrace's own filter costs there. The budget needs the
// programs' rate, not every second of their run time. Where the daemon holds
// the BPF_ENABLE_STATS fd (CAP_SYS_ADMIN) it keeps the statistics on for one
// second in `every_s` and carries that second's rate over the others. Where
// they come from kernel.bpf_stats_enabled=1 (the systemd unit's way, without
// CAP_SYS_ADMIN) they are on all the time and every second is measured.
//
// The statistics' own clock reads land partly inside what they measure: an
// empty program "runs" tens of ns. `floor_ns` (an empty program run through
// BPF_PROG_TEST_RUN with them on) is that part. A measured second counts what
// it cost (its run time plus one floor per run: the other clock read); the
// rate carried over the unmeasured seconds is the run time less one floor per
// run, what the programs cost with the statistics off.
#pragma once

#include <cstdint>

namespace steptrace::daemon {

// The bookkeeping alone (no fd, no kernel): unit-tested.
class StatsDutyPolicy {
 public:
  // every_s <= 1, or not owned: always on. owned: this process turns them on and off.
  StatsDutyPolicy(uint32_t every_s, bool owned, double floor_ns)
      : every_s_(every_s), owned_(owned), floor_ns_(floor_ns) {}

  void set_every(uint32_t every_s) { every_s_ = every_s; }
  bool cycling() const { return owned_ && every_s_ > 1; }
  // Called once a second with the cumulative run time and run count of the
  // daemon's programs as read now (they grow only while the statistics are
  // on). Returns the BPF seconds to count for the interval since the last call.
  double account(double now_s, uint64_t run_ns, uint64_t run_cnt);
  // After account(): should the statistics be on from now until the next call?
  bool want_on() const { return on_; }
  // The programs changed (another level, a rebuilt tracer): measure the next
  // second (from the next call on, or one more if one is being measured),
  // whatever the cycle says.
  void remeasure();
  double rate() const { return rate_; }  // BPF seconds per second, the last measured
  double floor_ns() const { return floor_ns_; }

 private:
  uint32_t every_s_;
  bool owned_;
  double floor_ns_;
  bool on_ = true;         // on since the last call (start: on)
  bool remeasure_ = false;
  bool have_last_ = false;
  double last_s_ = 0, since_s_ = 0;  // the last call; when the current on/off phase began
  uint64_t last_ns_ = 0, last_cnt_ = 0;
  double rate_ = 0;
};

// The fd and the floor: what the daemon holds.
class BpfStatsDuty {
 public:
  BpfStatsDuty() = default;
  BpfStatsDuty(const BpfStatsDuty&) = delete;
  BpfStatsDuty& operator=(const BpfStatsDuty&) = delete;
  ~BpfStatsDuty();

  // Turns the statistics on (BPF_ENABLE_STATS), or finds the sysctl on, and
  // measures the floor. Returns the errno of BPF_ENABLE_STATS (0: held).
  int start(uint32_t every_s);
  void set_every(uint32_t every_s) { policy_.set_every(every_s); }
  bool owned() const { return owned_; }
  bool cycling() const { return policy_.cycling(); }
  // The statistics can be read: held here, or the sysctl on.
  bool available() const;
  double floor_ns() const { return policy_.floor_ns(); }
  // Once a second (see StatsDutyPolicy::account); turns them on or off as the cycle says.
  double account(double now_s, uint64_t run_ns, uint64_t run_cnt);
  void remeasure();

 private:
  void apply();
  int fd_ = -1;
  bool owned_ = false;
  StatsDutyPolicy policy_{1, false, 0};
};

// kernel.bpf_stats_enabled is 1.
bool bpf_stats_sysctl_on();

}  // namespace steptrace::daemon
