// SPDX-License-Identifier: Apache-2.0
#include "export/provenance.h"

#include <fmt/core.h>
#include <time.h>

#include "capture/user_note.h"
#include "util/version.h"

namespace steptrace {

std::string wall_clock_text(const Provenance& p, uint64_t mono_ns) {
  if (p.realtime_minus_monotonic_ns == 0) return "";
  const int64_t wall = static_cast<int64_t>(mono_ns) + p.realtime_minus_monotonic_ns;
  if (wall <= 0) return "";
  time_t secs = static_cast<time_t>(wall / 1'000'000'000);
  struct tm tm {};
  if (!gmtime_r(&secs, &tm)) return "";
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:06}Z", buf, (wall % 1'000'000'000) / 1000);
}

std::string step_source_reason(const RankResult& rk, const ProcessNotes& notes) {
  auto probes = notes.probes_for(rk.pid);
  auto probed = [&](bool marker) -> const LibProbeNote* {
    for (const auto* p : probes)
      if ((p->path.find("steptrace_marker") != std::string::npos) == marker && p->functions > 0) return p;
    return nullptr;
  };
  auto through = [](const LibProbeNote& p) {
    return p.via.empty() || p.via == p.path ? std::string() : " through " + p.via;
  };
  switch (rk.source) {
    case StepSource::runtime_probes:
      if (const auto* p = probed(false)) return fmt::format("nrt_execute calls in {}{}", p->path, through(*p));
      return "nrt_execute calls in the runtime library";
    case StepSource::marker:
      if (const auto* p = probed(true)) return fmt::format("steptrace_step calls in {}{}", p->path, through(*p));
      return "steptrace_step calls in the step marker library";
    case StepSource::automatic: {
      if (const auto* p = probed(false))
        return fmt::format("{} was probed{} but nrt_execute ran fewer than twice on the main thread", p->path,
                           through(*p));
      for (const auto* p : probes)
        if (p->functions == 0 && p->path.find("libnrt") != std::string::npos)
          return fmt::format("the runtime library {} could not be probed ({}); steps from the device's queue kicks",
                             p->path, p->error.empty() ? "no function found" : p->error);
      return "no Neuron runtime library (libnrt.so) or step marker in the process's memory maps; steps from the "
             "device's queue kicks";
    }
    case StepSource::automatic_host:
      return "no accelerator use and no step marker; steps from the period of the collective traffic";
    case StepSource::none: break;
  }
  return "no steps";
}

nlohmann::json provenance_json(const SessionReport& r) {
  const Provenance& p = r.source;
  nlohmann::json j = {{"host", p.host},
                      {"kernel", p.kernel},
                      {"recorded_by", p.recorded_by},
                      {"reported_by", kVersion},
                      {"boot_id", p.boot_id},
                      {"realtime_minus_monotonic_ns", p.realtime_minus_monotonic_ns}};
  j["t0_wall_clock"] = wall_clock_text(p, r.window_start_ns);
  j["clock"] = clock_json(r.analysis.clock);
  return j;
}

const ProcIdentity* identity_of(const Analysis& a, uint32_t pid) {
  for (int depth = 0; pid && depth < 16; ++depth) {
    if (const ProcIdentity* id = a.notes.identity(pid)) return id;
    pid = a.timeline.parent_of(pid);
  }
  return nullptr;
}

nlohmann::json rank_identity_json(const RankResult& rk, const Analysis& a) {
  const ProcIdentity* id = identity_of(a, rk.pid);
  return id ? identity_to_json(*id) : nlohmann::json::object();
}

}  // namespace steptrace
