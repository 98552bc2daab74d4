// SPDX-License-Identifier: Apache-2.0
#include "multinode/job_perfetto.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "export/perfetto.h"

namespace steptrace {
namespace {

using nlohmann::json;

// Real pids are below 2^22 (PID_MAX_LIMIT); each host gets its own range.
constexpr uint64_t kHostPidStride = uint64_t{1} << 22;
constexpr uint64_t kHostIdStride = uint64_t{1} << 40;

// One host's events moved onto the job's time line, in place.
void place_host(json& events, size_t h, const JobHost& host, const SessionReport& r, int64_t job_t0) {
  auto job_us = [&](double ts_us) {
    const double mono = static_cast<double>(r.window_start_ns) + ts_us * 1e3;
    const uint64_t m = mono <= 0 ? 0 : static_cast<uint64_t>(std::llround(mono));
    return static_cast<double>(host.clock.to_job_ns(m) - job_t0) / 1e3;
  };
  for (auto& e : events) {
    if (auto ts = e.find("ts"); ts != e.end() && ts->is_number()) *ts = job_us(ts->get<double>());
    if (auto pid = e.find("pid"); pid != e.end() && pid->is_number_unsigned())
      *pid = pid->get<uint64_t>() + h * kHostPidStride;
    if (auto id = e.find("id"); id != e.end() && id->is_number_unsigned())
      *id = id->get<uint64_t>() + h * kHostIdStride;
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
      auto& name = e["args"]["name"];
      if (name.is_string())
        name = fmt::format("host {} ({}): {}", h, host.hostname, name.get<std::string>());
    }
  }
}

}  // namespace

json job_perfetto_trace(const JobReport& job, const std::vector<JobInput>& inputs) {
  int64_t job_t0 = std::numeric_limits<int64_t>::max();
  for (size_t h = 0; h < inputs.size() && h < job.hosts.size(); ++h)
    job_t0 = std::min(job_t0, job.hosts[h].clock.to_job_ns(inputs[h].report->window_start_ns));
  json events = json::array(), hosts = json::array();
  for (size_t h = 0; h < inputs.size() && h < job.hosts.size(); ++h) {
    const SessionReport& r = *inputs[h].report;
    json one = perfetto_trace(r);
    json& ev = one["traceEvents"];
    place_host(ev, h, job.hosts[h], r, job_t0);
    for (auto& e : ev) events.push_back(std::move(e));
    hosts.push_back({{"host", h},
                     {"capture", job.hosts[h].path},
                     {"hostname", job.hosts[h].hostname},
                     {"pid_offset", h * kHostPidStride},
                     {"clock_method", alignment_method_name(job.hosts[h].clock.method)},
                     {"source", one["metadata"]}});
  }
  json meta = {{"schema", "steptrace.perfetto-job/1"},
               // ts 0 is the earliest host's window start on the job's time line (wall-clock ns job_t0_ns).
               {"job_t0_ns", job_t0},
               {"alignment_bound_ns", job.alignment_bound_ns},
               {"network_aligned", job.network_aligned},
               {"headline", job.headline},
               {"hosts", hosts}};
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"metadata", meta}};
}

}  // namespace steptrace
