// SPDX-License-Identifier: Apache-2.0
// NUMA placement of each rank's main thread against its Neuron device: the
// main thread's on-CPU time in the counted steps by node (the CPU of each
// slice, from its switch-out), and the node the device hangs off (sysfs,
// signals/numa_topology.h). Time on another node than the device's is where
// its host-device copies and the runtime's buffers cross the interconnect.
#pragma once

#include <cstdint>
#include <string>

#include "signals/numa_topology.h"

namespace steptrace {

struct ThreadTimeline;

// Where a rank's device is (RankResult::numa).
struct DevicePlacement {
  int device = -1;       // the device index its main thread's ioctls used most; -1 none
  int device_node = -1;  // -1 unknown (one-node host, firmware gave none, replay)
  std::string device_bdf;
};

// The device a thread's accelerator ioctls went to most (-1 none).
int main_device(const ThreadTimeline& main);

DevicePlacement place_device(const ThreadTimeline& main, const signals::NumaTopology& topo);

// The main thread's on-CPU time in [s, e): all of it, and the part on a node
// other than `device_node` (0 when that is unknown).
void on_cpu_by_node(const ThreadTimeline& main, uint64_t s, uint64_t e, int device_node,
                    const signals::NumaTopology& topo, uint64_t* on_cpu_ns, uint64_t* remote_ns);

}  // namespace steptrace
