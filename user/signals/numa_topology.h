// SPDX-License-Identifier: Apache-2.0
// The host's NUMA layout from sysfs: which node each CPU is on and which
// node each Neuron device hangs off, for the placement check of the host
// steals (attribution/numa_placement.h). Read once per session: CPUs and
// PCI devices do not move while a job runs.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace::signals {

struct NumaTopology {
  std::vector<int> cpu_node;            // by CPU number; -1 where unknown
  std::map<int, int> device_node;       // Neuron device index -> node (known nodes only)
  std::map<int, std::string> device_bdf;
  int nodes = 0;                        // node directories seen
  // Placement can be judged: more than one node, and CPUs mapped.
  bool multi_node() const { return nodes > 1 && !cpu_node.empty(); }
  int node_of_cpu(int cpu) const {
    return cpu >= 0 && static_cast<size_t>(cpu) < cpu_node.size() ? cpu_node[static_cast<size_t>(cpu)] : -1;
  }
};

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; malformed parts are skipped.
std::vector<int> parse_cpu_list(std::string_view s);

// <root>/devices/system/node/nodeN/cpulist for the CPUs. The Neuron devices
// are the PCI functions of vendor 0x1d0f with a Neuron device id, in BDF
// order: the driver numbers them as it probes them, in bus order (its class
// devices in /sys/devices/virtual have no parent to follow). A numa_node of
// -1 (firmware gave none, as on one-node VMs) leaves the device unknown.
NumaTopology read_numa_topology(const std::string& sysfs_root);

}  // namespace steptrace::signals
