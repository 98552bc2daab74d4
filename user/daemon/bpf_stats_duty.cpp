// SPDX-License-Identifier: Apache-2.0
#include "daemon/bpf_stats_duty.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "util/sys_root.h"

namespace steptrace::daemon {

double StatsDutyPolicy::account(double now_s, uint64_t run_ns, uint64_t run_cnt) {
  if (!have_last_) {
    have_last_ = true;
    last_s_ = since_s_ = now_s;
    last_ns_ = run_ns;
    last_cnt_ = run_cnt;
    return 0;
  }
  const double dt = std::max(0.0, now_s - last_s_);
  double counted = 0;
  if (on_) {
    const double dns = run_ns >= last_ns_ ? static_cast<double>(run_ns - last_ns_) : 0;
    const double dcnt = run_cnt >= last_cnt_ ? static_cast<double>(run_cnt - last_cnt_) : 0;
    if (dt > 0) rate_ = std::max(0.0, dns - floor_ns_ * dcnt) / dt / 1e9;
    // Cycling, a measured second costs its run time and the statistics' other
    // clock read; always on, the run time as the kernel counts it (as before).
    counted = (dns + (cycling() ? floor_ns_ * dcnt : 0)) / 1e9;
  } else {
    counted = rate_ * dt;
  }
  last_s_ = now_s;
  last_ns_ = run_ns;
  last_cnt_ = run_cnt;
  if (!cycling()) {
    on_ = true;
  } else if (!on_ && (remeasure_ || now_s - since_s_ >= static_cast<double>(every_s_ - 1) - 0.1)) {
    on_ = true;
    since_s_ = now_s;
    remeasure_ = false;
  } else if (on_ && now_s - since_s_ >= 0.9) {
    // A second measured; one more when the programs changed during it.
    if (!remeasure_) on_ = false;
    remeasure_ = false;
    since_s_ = now_s;
  }
  return counted;
}

void StatsDutyPolicy::remeasure() { remeasure_ = true; }

namespace {

// An empty program run 20 000 times through BPF_PROG_TEST_RUN with the
// statistics on: what they count of their own reads per run. 0 if it cannot.
double measure_floor_ns() {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},  // r0 = 0
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  const int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "st_stats_floor", "GPL", insns, 2, nullptr);
  if (fd < 0) return 0;
  unsigned char packet[64] = {};
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = packet, .data_size_in = sizeof(packet), .repeat = 20000);
  double floor = 0;
  if (bpf_prog_test_run_opts(fd, &run) == 0) {
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.run_cnt > 0)
      floor = static_cast<double>(info.run_time_ns) / static_cast<double>(info.run_cnt);
  }
  ::close(fd);
  return floor;
}

}  // namespace

bool bpf_stats_sysctl_on() {
  auto v = read_small_file("/proc/sys/kernel/bpf_stats_enabled", 64);
  return v && !v->empty() && (*v)[0] == '1';
}

BpfStatsDuty::~BpfStatsDuty() {
  if (fd_ >= 0) ::close(fd_);
}

int BpfStatsDuty::start(uint32_t every_s) {
  fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  const int err = fd_ >= 0 ? 0 : errno;
  owned_ = fd_ >= 0;
  policy_ = StatsDutyPolicy(every_s, owned_, owned_ ? measure_floor_ns() : 0);
  return err;
}

bool BpfStatsDuty::available() const { return owned_ || bpf_stats_sysctl_on(); }

double BpfStatsDuty::account(double now_s, uint64_t run_ns, uint64_t run_cnt) {
  const double counted = policy_.account(now_s, run_ns, run_cnt);
  apply();
  return counted;
}

void BpfStatsDuty::remeasure() { policy_.remeasure(); }

void BpfStatsDuty::apply() {
  if (!owned_) return;
  if (policy_.want_on() && fd_ < 0) {
    fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
    // Refused now where it worked at start (a capability dropped since):
    // always on is no longer in our hands; count what the kernel counts.
    if (fd_ < 0) {
      owned_ = false;
      policy_ = StatsDutyPolicy(1, false, 0);
    }
  } else if (!policy_.want_on() && fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace steptrace::daemon
