// SPDX-License-Identifier: Apache-2.0
#include "signals/signals_json.h"

namespace steptrace::signals {

nlohmann::json summary_to_json(const DeviceSignalsSummary& s) {
  using nlohmann::json;
  auto src = [](const SignalSource& x) { return json{{"available", x.available}, {"detail", x.detail}}; };
  json proxies = json::array();
  for (const auto& p : s.proxies) proxies.push_back({{"pid", p.pid}, {"tid", p.tid}, {"comm", p.comm}, {"how", p.how}});
  json memory = json::array();
  for (const auto& m : s.device_memory) {
    json kinds = json::object();
    for (const auto& [k, v] : m.by_kind) kinds[k] = v;
    memory.push_back({{"device", m.device}, {"now_bytes", m.now_bytes}, {"peak_bytes", m.peak_bytes},
                      {"host_bytes", m.host_bytes}, {"by_kind", kinds}});
  }
  json sysfs = json::object();
  for (const auto& [k, v] : s.sysfs_deltas) sysfs[k] = v;
  return {{"available", {{"nds", src(s.nds)}, {"efa", src(s.efa)}, {"neuron_sysfs", src(s.neuron_sysfs)},
                         {"proxy_threads", src(s.proxy)}}},
          {"device_split_source", s.split_from_nds ? "nds" : "arrival_skew"},
          {"execution_bound", s.execution_bound},
          {"mean_device_compute_ms", s.mean_compute_ms},
          {"mean_device_collective_ms", s.mean_cc_ms},
          {"mean_device_ms", s.mean_device_ms},
          {"efa", {{"link_gbit", s.link_gbit}, {"achieved_gbit", s.achieved_gbit}, {"ratio", s.net_ratio},
                   {"network_bound", s.network_bound}, {"mib_per_step", s.efa_mib_per_step}}},
          {"proxy_threads", proxies},
          {"proxy_runq_ms_per_step", s.proxy_runq_ms_per_step},
          {"proxy_preempted_per_step", s.proxy_preempted_per_step},
          {"proxy_top_preemptor", std::string(s.proxy_top_preemptor)},
          {"proxy_runq_share_of_collective", s.proxy_runq_share_of_collective},
          {"proxy_share_of", std::string(s.proxy_share_of)},
          {"neuron_sysfs_deltas", sysfs},
          {"device_mem_bytes", s.device_mem_bytes},
          {"device_memory", memory}};
}

nlohmann::json step_to_json(const StepDeviceSignals& d) {
  nlohmann::json j = nlohmann::json::object();
  if (d.nds)
    j["nds"] = {{"exec_seq", d.exec_seq},   {"device_ns", d.device_ns}, {"compute_ns", d.compute_ns},
                {"collective_ns", d.cc_ns}, {"total_ns", d.total_ns},   {"errors", d.exec_errors}};
  if (d.efa)
    j["efa"] = {{"tx_bytes", d.efa_tx_bytes},
                {"rx_bytes", d.efa_rx_bytes},
                {"send_bytes", d.efa_send_bytes},
                {"rdma_write_bytes", d.efa_rdma_write_bytes},
                {"trouble", d.efa_trouble},
                {"link_ratio", d.net_ratio}};
  j["proxy_runq_ns"] = d.proxy_runq_ns;
  j["proxy_preempted"] = d.proxy_preempted;
  return j;
}

}  // namespace steptrace::signals
