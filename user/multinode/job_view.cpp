// SPDX-License-Identifier: Apache-2.0
#include "multinode/job_view.h"

#include <fmt/core.h>

namespace steptrace {

namespace {

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string clock_words(const JobHost& h) {
  const HostAlignment& c = h.clock;
  switch (c.method) {
    case AlignmentMethod::same_boot:
      return fmt::format("same boot as host {}: one monotonic clock, exact", c.same_boot_as);
    case AlignmentMethod::anchors:
      return fmt::format("{} wall-clock anchor(s), each within +-{} ns, drift {:+.2f} ppm{}", c.anchors,
                         c.reading_bound_ns, c.drift_ppm, c.wall_clock_stepped ? ", the wall clock was STEPPED" : "");
    case AlignmentMethod::network:
      return fmt::format("{} wall-clock anchor(s), then the bytes exchanged with host {} ({} exchanges to it, {} "
                         "from it): {:+.3f} ms on its wall clock, drift {:+.2f} ppm, within +-{:.1f} us",
                         c.anchors, c.net_peer, c.net_lower, c.net_upper, static_cast<double>(c.net_offset_ns) / 1e6,
                         c.net_drift_ppm, static_cast<double>(c.net_bound_ns) / 1e3);
    case AlignmentMethod::start_offset: return "one wall-clock offset at the start (no anchors: bound unknown)";
    case AlignmentMethod::none: break;
  }
  return "not aligned (no anchors, no wall-clock offset)";
}

std::string clock_line(const JobHost& h) {
  std::string s = clock_words(h);
  if (!h.network_why_not.empty()) s += "; not refined by the network: " + h.network_why_not;
  return s;
}

std::string alignment_words(const JobReport& job) {
  if (job.wall_clock_hosts <= 1)
    return "every host shares one monotonic clock with another (same boot): aligned exactly";
  if (job.network_aligned)
    return fmt::format("by the bytes the hosts exchanged over TCP, on top of their wall clocks: any two hosts within "
                       "+-{:.1f} us", static_cast<double>(job.alignment_bound_ns) / 1e3);
  std::string own;
  if (job.wall_clock_bound_ns >= 0) {
    own = fmt::format("within +-{:.3f} ms in all, by the maximum errors the hosts' kernels state for their wall "
                      "clocks (adjtimex, as their NTP daemons set them)",
                      static_cast<double>(job.wall_clock_bound_ns) / 1e6);
  } else if (!job.unsynced_hosts.empty()) {
    std::string hosts;
    for (size_t h : job.unsynced_hosts) hosts += (hosts.empty() ? "" : ", ") + std::to_string(h);
    own = fmt::format("NOT BOUNDED: the wall clock of host(s) {} was not synchronized (adjtimex)", hosts);
  } else {
    own = "not stated by the captures (~1 ms under NTP, tens of us under PTP)";
  }
  return fmt::format("by each host's wall clock: within +-{} ns of reading error, plus the hosts' wall clocks' "
                     "own errors: {}",
                     job.alignment_bound_ns, own);
}

nlohmann::json network_json(const JobHost& h) {
  using nlohmann::json;
  const HostAlignment& c = h.clock;
  if (c.net_peer < 0) return {{"why_not", h.network_why_not.empty() ? nullptr : json(h.network_why_not)}};
  return {{"peer", c.net_peer},           {"offset_ns", c.net_offset_ns}, {"origin_ns", c.net_origin_ns},
          {"drift_ppm", c.net_drift_ppm}, {"bound_ns", c.net_bound_ns},   {"exchanges_to", c.net_lower},
          {"exchanges_from", c.net_upper}, {"why_not", nullptr}};
}

nlohmann::json link_json(const HostLink& l) {
  using nlohmann::json;
  if (!l.measured) return {{"why_not", l.why_not}};
  return {{"link_gbit", l.link_gbit},       {"achieved_gbit", l.achieved_gbit}, {"ratio", l.ratio},
          {"mib_per_step", l.mib_per_step}, {"network_bound", l.network_bound}, {"why_not", nullptr}};
}

}  // namespace

std::string job_alignment_text(const JobReport& job) { return alignment_words(job); }
std::string job_host_clock_text(const JobHost& host) { return clock_line(host); }

std::string format_job_text(const JobReport& job) {
  std::string out;
  out += fmt::format("steptrace job report: {} host capture(s), {} rank(s){}{}\n", job.hosts.size(), job.ranks.size(),
                     job.world_size > 0 ? fmt::format(" of WORLD_SIZE {}", job.world_size) : "",
                     job.job_id.empty() ? "" : ", job " + job.job_id);
  out += fmt::format("\nVerdict: {}\n", job.headline);
  for (const auto& e : job.evidence) out += fmt::format("  - {}\n", e);
  out += fmt::format("\nClocks: {}\n", alignment_words(job));
  for (size_t h = 0; h < job.hosts.size(); ++h) {
    const auto& host = job.hosts[h];
    out += fmt::format("  host {} {} ({}): {}{}\n", h, host.hostname, host.path, clock_line(host),
                       host.incomplete ? " [INCOMPLETE capture]" : "");
  }
  out += "\nEach host's own verdict (its ranks numbered locally):\n";
  for (size_t h = 0; h < job.hosts.size(); ++h)
    out += fmt::format("  host {}: {}\n", h, job.hosts[h].local_headline);
  out += fmt::format("\nNodes ({} steps paired across every rank, ends within {:.1f} ms):\n", job.job_steps,
                     ms(job.pairing_tolerance_ns));
  out += "  node  hosts  ranks      step ms  collective ms/rank  steps held back\n";
  for (const auto& n : job.nodes) {
    std::vector<int> ranks;
    for (size_t i : n.ranks) ranks.push_back(job.ranks[i].global_rank);
    std::string hosts;
    for (size_t h : n.hosts) hosts += (hosts.empty() ? "" : ",") + std::to_string(h);
    out += fmt::format("  {:>4}  {:>5}  {:<9} {:>8.1f}  {:>18.1f}  {:>15}\n", n.node, hosts, rank_ranges(ranks),
                       ms(n.mean_step_ns), ms(n.mean_collective_ns), n.last_steps);
  }
  out += "\nRanks:\n  rank  node  host  pid      step ms  collective ms  largest other          steps held back\n";
  for (const auto& r : job.ranks) {
    const uint64_t n = r.matched_steps ? r.matched_steps : 1;
    // What the rank's time went to besides waiting for the others.
    size_t top = 0;
    for (size_t c = 1; c < kCategories; ++c)
      if (c != static_cast<size_t>(Category::collective) && (top == static_cast<size_t>(Category::collective) ||
                                                              r.ns[c] > r.ns[top]))
        top = c;
    out += fmt::format("  {:>4}{} {:>4}  {:>4}  {:<7} {:>8.1f}  {:>13.1f}  {:<15} {:>5.1f}  {:>15}\n", r.global_rank,
                       r.rank_from_launcher ? " " : "*", r.node, r.host, r.pid, ms(r.step_ns_sum / n),
                       ms(r.ns[static_cast<size_t>(Category::collective)] / n), kCategoryNames[top],
                       ms(r.ns[top] / n), r.last_steps);
  }
  bool any_guess = false;
  for (const auto& r : job.ranks) any_guess = any_guess || !r.rank_from_launcher;
  if (any_guess) out += "  * no RANK in its environment: numbered after the ranks that have one\n";
  for (const auto& w : job.warnings) out += fmt::format("\nwarning: {}\n", w);
  return out;
}

nlohmann::json job_report_json(const JobReport& job) {
  using nlohmann::json;
  json j;
  j["kind"] = "job";
  j["job_id"] = job.job_id;
  j["world_size"] = job.world_size;
  j["headline"] = job.headline;
  j["evidence"] = job.evidence;
  j["warnings"] = job.warnings;
  j["paired_steps"] = job.job_steps;
  j["pairing_tolerance_ns"] = job.pairing_tolerance_ns;
  j["common_category"] = category_name(job.common_category);
  j["alignment"] = {{"wall_clock_hosts", job.wall_clock_hosts},
                    {"network_aligned", job.network_aligned},
                    {"bound_ns", job.alignment_bound_ns},
                    {"reading_bound_ns", job.reading_bound_ns},
                    {"wall_clock_bound_ns", job.wall_clock_bound_ns >= 0 ? json(job.wall_clock_bound_ns) : json(nullptr)},
                    {"unsynced_hosts", job.unsynced_hosts}};
  json culprit = nullptr;
  if (job.culprit.found) {
    const auto& c = job.culprit;
    const auto& r = job.ranks[c.rank];
    json victims = json::array();
    for (size_t i : c.victims) victims.push_back(job.ranks[i].global_rank);
    culprit = {{"rank", r.global_rank}, {"node", r.node}, {"host", job.hosts[r.host].hostname},
               {"pid", r.pid}, {"steps_held_back", c.last_steps}, {"mean_late_ns", c.mean_late_ns},
               {"cause", category_name(c.cause)}, {"cause_detail", c.cause_detail},
               {"cause_excess_ns_per_step", c.cause_excess_ns}, {"victims", victims},
               {"victim_wait_ns_per_step", c.victim_wait_ns}};
  }
  j["culprit"] = culprit;
  j["hosts"] = json::array();
  for (const auto& h : job.hosts)
    j["hosts"].push_back({{"capture", h.path}, {"hostname", h.hostname}, {"boot_id", h.boot_id},
                          {"ranks", h.ranks}, {"incomplete", h.incomplete}, {"local_headline", h.local_headline},
                          {"local_category", category_name(h.local_category)}, {"link", link_json(h.link)},
                          {"clock", {{"method", alignment_method_name(h.clock.method)},
                                     {"same_boot_as", h.clock.same_boot_as},
                                     {"offset_ns", h.clock.offset_ns},
                                     {"mono_origin_ns", h.clock.mono_origin_ns},
                                     {"drift_ppm", h.clock.drift_ppm},
                                     {"reading_bound_ns", h.clock.reading_bound_ns},
                                     {"anchors", h.clock.anchors},
                                     {"wall_clock_stepped", h.clock.wall_clock_stepped},
                                     {"wall_max_error_us", h.clock.wall_max_error_us},
                                     {"wall_unsynced", h.clock.wall_unsynced},
                                     {"network", network_json(h)}}}});
  j["nodes"] = json::array();
  for (const auto& n : job.nodes) {
    json ranks = json::array();
    for (size_t i : n.ranks) ranks.push_back(job.ranks[i].global_rank);
    j["nodes"].push_back({{"node", n.node}, {"hosts", n.hosts}, {"ranks", ranks}, {"mean_step_ns", n.mean_step_ns},
                          {"mean_collective_ns", n.mean_collective_ns}, {"steps_held_back", n.last_steps}});
  }
  j["ranks"] = json::array();
  for (const auto& r : job.ranks) {
    json ns = json::object();
    for (size_t c = 0; c < kCategories; ++c) ns[std::string(kCategoryNames[c])] = r.ns[c];
    j["ranks"].push_back({{"rank", r.global_rank}, {"rank_from_launcher", r.rank_from_launcher}, {"node", r.node},
                          {"local_rank", r.local_rank}, {"host", r.host}, {"pid", r.pid},
                          {"paired_steps", r.matched_steps}, {"step_ns_sum", r.step_ns_sum},
                          {"steps_held_back", r.last_steps}, {"category_ns", ns}});
  }
  return j;
}

}  // namespace steptrace
