// SPDX-License-Identifier: Apache-2.0
// What every live command and the daemon do before they load the programs:
// refuse on a failed preflight check (with its hint), learn the host's
// device majors once, and put both into the TracerSettings. One home, so the
// CLI and the daemon cannot drift apart on what they check or decode.
#pragma once

#include <cstdint>
#include <string>

#include "loader/dev_files.h"
#include "loader/features.h"
#include "loader/tracer.h"
#include "util/result.h"
#include "util/sys_root.h"

namespace steptrace {

// An error naming the first failed preflight row: "NAME: DETAIL (HINT)".
Status check_preflight(const KernelFeatures& f, const std::string& proc_root = "/proc");

// Char majors from /proc/devices: the Neuron driver's and RDMA verbs' (the EFA
// control path). 0 when the host has none. Logs what it finds.
struct HostDevices {
  uint32_t neuron_major = 0;
  uint32_t uverbs_major = 0;
};
HostDevices find_host_devices(const SysRoot& root);

// The device part of the settings: majors, named device files, uverbs decoding.
void set_devices(TracerSettings& ts, const HostDevices& host, const DevFileSet& files);

}  // namespace steptrace
