// SPDX-License-Identifier: Apache-2.0
#include "multinode/job_links.h"

#include <fmt/core.h>

#include <algorithm>

namespace steptrace {

HostLink host_link(const SessionReport& r) {
  HostLink l;
  const auto& S = r.job.signals;
  if (!S.efa.available) {
    l.why_not = S.efa.detail.empty() ? "no adapter counters (EFA) in its capture" : "no EFA: " + S.efa.detail;
    return l;
  }
  if (S.link_gbit <= 0 || S.net_ratio < 0) {
    l.why_not = S.link_gbit <= 0 ? "its adapters state no link rate" : "no step's collective moved bytes on them";
    return l;
  }
  l.measured = true;
  l.link_gbit = S.link_gbit;
  l.achieved_gbit = S.achieved_gbit;
  l.ratio = S.net_ratio;
  l.mib_per_step = S.efa_mib_per_step;
  l.network_bound = S.network_bound;
  return l;
}

namespace {

// The nodes whose ranks a host holds ("0", "0,1"; the host's index when
// its ranks name none).
std::string host_nodes(const JobReport& job, size_t h) {
  std::vector<int> nodes;
  for (const auto& r : job.ranks)
    if (r.host == h) nodes.push_back(r.node);
  return nodes.empty() ? std::to_string(h) : rank_ranges(nodes);
}

}  // namespace

void link_evidence(JobReport& job) {
  std::vector<size_t> bound, measured;
  for (size_t h = 0; h < job.hosts.size(); ++h) {
    const HostLink& l = job.hosts[h].link;
    if (!l.measured) continue;
    measured.push_back(h);
    if (l.network_bound) bound.push_back(h);
    job.evidence.push_back(fmt::format(
        "node {} ({}): the collective achieves {:.2f} of {:.1f} Gbit/s on its ranks' adapters (ratio {:.2f}, "
        "{:.1f} MiB/step each) -> {}",
        host_nodes(job, h), job.hosts[h].hostname, l.achieved_gbit, l.link_gbit, l.ratio, l.mib_per_step,
        l.network_bound ? "network-bound" : "not network-bound"));
  }
  if (job.culprit.found || job.common_category != Category::collective) return;
  if (measured.empty()) {
    job.evidence.push_back("the links' rate is not known: no host's capture holds adapter counters (EFA)");
    return;
  }
  if (bound.empty()) return;
  // The slowest bound host's figures: every rank waits for the slowest link.
  const size_t worst = *std::min_element(bound.begin(), bound.end(), [&](size_t a, size_t b) {
    return job.hosts[a].link.achieved_gbit < job.hosts[b].link.achieved_gbit;
  });
  std::vector<int> nodes;
  for (size_t h : bound)
    for (const auto& r : job.ranks)
      if (r.host == h) nodes.push_back(r.node);
  const HostLink& w = job.hosts[worst].link;
  job.headline += fmt::format("; the collective is network-bound: {:.2f} of {:.1f} Gbit/s on node(s) {}{}",
                              w.achieved_gbit, w.link_gbit, rank_ranges(nodes),
                              bound.size() < measured.size() ? " (the other nodes' links are not saturated)" : "");
}

}  // namespace steptrace
