// SPDX-License-Identifier: Apache-2.0
// DeviceSignals: samples the device counters on every drain tick (NDS of
// each traced rank process, EFA port counters, Neuron sysfs metrics at a
// low rate), and the analysis hook that turns the samples into per-step
// device compute vs device collective, bytes per step, the network-bound
// test and proxy-thread scheduling delay.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attribution/job_analysis.h"
#include "signals/counters.h"
#include "signals/step_signals.h"

namespace steptrace::signals {

struct SignalsConfig {
  bool enabled = true;
  std::string sysfs_root = "/sys";
  std::string dev_root = "/dev";
  std::string proc_root = "/proc";
  uint64_t efa_interval_ns = 10'000'000;      // = the RDMA core's default counter lifespan
  uint64_t sysfs_interval_ns = 500'000'000;   // "low rate"
  uint64_t attach_retry_ns = 100'000'000;     // a rank acquires its datastore in nrt_init
  uint64_t attach_give_up_ns = 20'000'000'000ull;
  // Memory bound: samples kept per kind (NDS, EFA, sysfs). Past it, new
  // samples are counted in samples_dropped and the report says so.
  size_t max_samples = 262'144;
  // Datastore attach attempts (one ACQUIRE_NEURON_DS ioctl each) across all
  // processes together: a token bucket, so that `attach --all` with a
  // thousand processes does not become a thousand ioctls per device per tick
  // into the job's driver. Processes are served in turn; those seen issuing
  // accelerator ioctls first.
  double attach_ioctls_per_s = 500;
  uint32_t attach_ioctl_burst = 64;
  // The system calls on the devices (nullptr: the real ones). Each device is
  // opened once per session, however many processes are attached.
  NdsDeviceOps* ops = nullptr;
};

struct NdsSample {
  uint32_t pid = 0;
  int device = 0, nc = 0;
  uint64_t prev_ns = 0, seen_ns = 0;  // the execution completed in (prev_ns, seen_ns]
  uint64_t delta = 0;                 // executions since the previous sample (1: exact)
  NdsNcSnapshot snap;
};
struct EfaSample {
  uint64_t ts = 0;
  int port = 0;                 // index into SignalsData::efa_ports
  std::vector<uint64_t> v;      // efa_counter_names() order; UINT64_MAX: missing
};
struct SysfsSample {
  uint64_t ts = 0;
  int device = 0;
  std::map<std::string, uint64_t> v;
};

struct SignalsData {
  SignalsConfig cfg;
  std::vector<std::pair<int, std::string>> devices;
  std::vector<EfaPort> efa_ports;
  std::string nds_problem;             // the most telling reason no datastore was attached
  std::map<uint32_t, int> pid_device;  // rank pid -> device whose datastore it has
  std::vector<NdsSample> nds;
  std::vector<EfaSample> efa;
  std::vector<SysfsSample> sysfs;
  std::map<uint32_t, std::string> comms;  // tid -> comm of attached processes' threads
  std::map<uint32_t, uint32_t> tid_pid;
  uint64_t samples_dropped = 0;  // over cfg.max_samples
  uint64_t device_opens = 0;     // open(2) of /dev/neuronN (at most one per device, plus retries of failed ones)
  uint64_t acquire_calls = 0;    // ACQUIRE_NEURON_DS ioctls issued
};

class DeviceSignals {
 public:
  explicit DeviceSignals(SignalsConfig cfg);
  ~DeviceSignals();
  DeviceSignals(const DeviceSignals&) = delete;
  DeviceSignals& operator=(const DeviceSignals&) = delete;
  // One drain tick: attach new processes, sample what is due. `accel_pids`
  // (a subset of pids: those seen issuing accelerator ioctls) are tried first.
  void tick(uint64_t now_ns, const std::vector<uint32_t>& pids, const std::set<uint32_t>& accel_pids = {});
  SignalsData take();
  const SignalsData& data() const { return d_; }

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

  SignalsData d_;
  std::map<uint32_t, Attached> attached_;
  std::map<uint32_t, Pending> pending_;
  std::map<int, DeviceFd> dev_fds_;
  double tokens_ = 0;
  uint64_t tokens_at_ = 0;
  uint32_t rr_next_ = 0;  // round robin: the pid to start from on the next tick
  bool nds_unsupported_ = false;  // the driver answered unsupported / no permission: stop asking
  uint64_t next_efa_ = 0, next_sysfs_ = 0, next_comm_ = 0, next_scan_ = 0;
  int problem_rank_ = 0;
};

// The hook at the end of analyze_job (before the shares and the verdict):
// fills each step's `dev`, splits device execute into device compute and
// device collective from the NDS, and the summary. Returns true when the NDS
// split was applied (the caller then skips the arrival-skew estimate).
bool apply_device_signals(std::vector<RankResult*>& ranks, const TimelineStore& tl, const ThreadTable& threads,
                          const SignalsData* data, int skip_steps, DeviceSignalsSummary* out);
// After the verdict: which signals it had, and what they say.
void annotate_verdict(JobAnalysis& job);

}  // namespace steptrace::signals
