// SPDX-License-Identifier: Apache-2.0
// What every output says about where its data came from: the host, kernel
// and steptrace that traced, the wall-clock time of t0 (to line a trace up
// with a PyTorch-profiler or neuron-profile trace), who each rank is
// (container, pod, launcher rank) and why its steps came from the source
// they came from.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/analysis.h"

namespace steptrace {

// "2026-12-02T01:30:00.123456Z" for a CLOCK_MONOTONIC time, "" when the anchor is unknown.
std::string wall_clock_text(const Provenance& p, uint64_t mono_ns);
// One sentence: why the rank's steps came from where they did ("the runtime
// library /opt/x/libnrt.so.1, probed through /proc/7/root/...", "no Neuron
// runtime library in the process's memory maps: ...").
std::string step_source_reason(const RankResult& rk, const ProcessNotes& notes);
// The JSON "source" object of a report.
nlohmann::json provenance_json(const SessionReport& r);
// The identity noted for `pid`, else for its nearest noted ancestor: a rank
// forked by its launcher without an exec shares the launcher's cgroup and
// environment. nullptr when none is known.
const ProcIdentity* identity_of(const Analysis& a, uint32_t pid);
// The rank's identity object (empty object when nothing is known).
nlohmann::json rank_identity_json(const RankResult& rk, const Analysis& a);

}  // namespace steptrace
