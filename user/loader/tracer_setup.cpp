// SPDX-License-Identifier: Apache-2.0
#include "loader/tracer_setup.h"

#include <fmt/core.h>

#include "loader/preflight.h"
#include "util/log.h"

namespace steptrace {

Status check_preflight(const KernelFeatures& f, const std::string& proc_root) {
  auto lockdown = read_small_file("/sys/kernel/security/lockdown");
  auto rows = run_preflight(f, read_capabilities(proc_root), parse_lockdown(lockdown.value_or("")));
  for (const auto& r : rows)
    if (r.status == CheckStatus::fail) return make_error(fmt::format("{}: {} ({})", r.name, r.detail, r.hint));
  return Ok{};
}

HostDevices find_host_devices(const SysRoot& root) {
  HostDevices h;
  h.neuron_major = root.char_major("neuron").value_or(0);
  if (h.neuron_major) log::info("found Neuron devices: char major {}", h.neuron_major);
  h.uverbs_major = root.char_major("infiniband_verbs").value_or(0);
  if (h.uverbs_major) log::info("found RDMA verbs devices (EFA control path): char major {}", h.uverbs_major);
  return h;
}

void set_devices(TracerSettings& ts, const HostDevices& host, const DevFileSet& files) {
  ts.neuron_major = host.neuron_major;
  ts.uverbs_major = host.uverbs_major;
  ts.n_accel_devs = files.size();
  ts.rdma_verbs = host.uverbs_major != 0 || files.has_rdma();
}

}  // namespace steptrace
