// SPDX-License-Identifier: Apache-2.0
// Per-step and per-window results of the device counters (NDS, EFA, Neuron
// sysfs, network proxy threads). Plain structs so job_analysis.h can hold
// them without depending on the readers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace steptrace::signals {

struct StepDeviceSignals {
  // NDS: the step's execution, split by the device (0 when not measured).
  bool nds = false;
  uint64_t device_ns = 0, compute_ns = 0, cc_ns = 0, total_ns = 0;
  uint64_t exec_seq = 0;      // the datastore's execution number
  uint64_t exec_errors = 0;   // errors + timeouts recorded during the step
  // EFA: bytes on this rank's adapter during the step.
  bool efa = false;
  uint64_t efa_tx_bytes = 0, efa_rx_bytes = 0;
  uint64_t efa_send_bytes = 0;        // host-driven messages
  uint64_t efa_rdma_write_bytes = 0;  // device RDMA writes
  uint64_t efa_trouble = 0;           // drops, retransmits, errors
  double net_ratio = -1;              // achieved / link rate on the busiest path (-1 unknown)
  // The network-bound test's terms of this step on each path (host messages,
  // device RDMA, any traffic): its bytes at the link rate and its collective
  // time, seconds (coll_s 0: the path does not count in this step). Kept so
  // that the job's test adds up the steps of every window, not the last one's.
  struct NetPath {
    double link_s = 0, coll_s = 0;
  };
  NetPath net_host, net_device, net_any;
  double link_gbit = 0;  // the rank's adapter's rate (0: no EFA)
  // Network proxy threads of this rank: run-queue delay during the step's executions.
  uint64_t proxy_runq_ns = 0;
  uint32_t proxy_preempted = 0;
  // Who preempted them in this step, and how often: the most frequent few
  // (the summary adds them up over steps; exact while a step has no more).
  struct Preemptor {
    uint32_t tid = 0, n = 0;
  };
  static constexpr size_t kPreemptorsKept = 4;
  Preemptor proxy_preemptors[kPreemptorsKept] = {};
  // What the proxies' delay is compared with in this step: the device
  // collective (NDS), else the executions in it, else the step's collective.
  enum class ProxyBase : uint8_t { step_collective, executions, device_collective };
  ProxyBase proxy_base = ProxyBase::step_collective;
  uint64_t proxy_base_ns = 0;
};

struct SignalSource {
  bool available = false;
  std::string detail;  // why not, or what was found
};

struct ProxyThread {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  std::string how;  // "name", "behaviour" or "name+behaviour"
};

// A Neuron device's memory from its sysfs counters (device_mem of every core,
// host_mem of the device) over the window's samples.
struct DeviceMemory {
  int device = 0;
  uint64_t now_bytes = 0;   // device memory at the last sample
  uint64_t peak_bytes = 0;  // the largest of the samples (a spike between two can be missed)
  uint64_t host_bytes = 0;  // the device's host memory at the last sample
  std::map<std::string, uint64_t> by_kind;  // tensors, model_code, ... at the last sample, over the cores
};

struct DeviceSignalsSummary {
  SignalSource nds, efa, neuron_sysfs, proxy;
  bool split_from_nds = false;    // device execute split by NDS (else arrival skew)
  // Per execution, over counted steps with NDS.
  double mean_compute_ms = 0, mean_cc_ms = 0, mean_device_ms = 0;
  std::string execution_bound = "unknown";  // "compute", "collective" or "unknown"
  // EFA network-bound collective test.
  double link_gbit = 0;          // per adapter
  double achieved_gbit = 0;      // over the window (counted steps) on the busiest path
  double net_ratio = -1;         // window bytes / collective time / link rate
  bool network_bound = false;
  double efa_mib_per_step = 0;
  // Neuron sysfs: status counters that moved in the window (name -> delta).
  std::vector<std::pair<std::string, uint64_t>> sysfs_deltas;
  uint64_t device_mem_bytes = 0;
  std::vector<DeviceMemory> device_memory;  // by device, those with samples
  std::vector<ProxyThread> proxies;
  double proxy_runq_ms_per_step = 0;
  double proxy_preempted_per_step = 0;  // involuntary switch-outs of proxy threads
  // "comm/tid" of the task that preempted them most. A fixed buffer: another
  // std::string member here trips GCC 12's false -Wfree-nonheap-object where
  // reports are moved out of a Result.
  char proxy_top_preemptor[40] = {};
  double proxy_runq_share_of_collective = 0;  // proxy run-queue delay / proxy_share_of (counted steps)
  const char* proxy_share_of = "";            // what the share is of: device collective (NDS), execution time
  std::vector<std::string> evidence;  // lines for the verdict
};

}  // namespace steptrace::signals
