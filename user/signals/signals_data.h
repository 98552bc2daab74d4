// SPDX-License-Identifier: Apache-2.0
// The sampled device counters as passive data: what DeviceSignals
// (signals/device_signals.h) collected, and queries over it. Attribution
// reads these; nothing here knows about steps or ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "signals/counters.h"
#include "signals/numa_topology.h"

namespace steptrace::signals {

struct SignalsConfig {
  bool enabled = true;
  std::string sysfs_root = "/sys";
  std::string dev_root = "/dev";
  std::string proc_root = "/proc";
  uint64_t efa_interval_ns = 10'000'000;      // = the RDMA core's default counter lifespan
  // The datastore's words are last-value per execution: an attached rank's
  // are read at least this often (and a rank not yet attached is retried).
  uint64_t nds_interval_ns = 10'000'000;
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
  NumaTopology numa;             // read once at the start (sysfs_root)
};

// Value of EFA port `port`'s counter `k` (efa_counter_names() order) at time
// t, linear between the samples around it; nullopt when the port has no
// sample of it.
std::optional<double> efa_counter_at(const SignalsData& d, int port, size_t k, uint64_t t);

// Index of an EFA counter in efa_counter_names() (its size when unknown).
size_t efa_counter_index(const std::string& name);

}  // namespace steptrace::signals
