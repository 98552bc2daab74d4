// SPDX-License-Identifier: Apache-2.0
#include "multinode/job_merge.h"
#include "multinode/job_links.h"
#include "multinode/stream_match.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace steptrace {

namespace {

constexpr size_t kColl = static_cast<size_t>(Category::collective);

std::optional<int> launcher_int(const ProcIdentity* id, std::initializer_list<std::string_view> keys) {
  return id ? id->launcher_int(keys) : std::nullopt;
}

// Every capture's host, its clock mapping, and its ranks with who the
// launcher says they are.
void collect(const std::vector<JobInput>& inputs, JobReport& job) {
  std::set<std::string> job_ids;
  for (size_t h = 0; h < inputs.size(); ++h) {
    const SessionReport& r = *inputs[h].report;
    JobHost host;
    host.path = inputs[h].path;
    host.hostname = r.source.host;
    host.boot_id = r.source.boot_id;
    host.clock = align_by_anchors(r.analysis.clock, r.source.realtime_minus_monotonic_ns);
    host.local_headline = r.job.verdict.headline;
    host.local_category = r.job.verdict.category;
    host.link = host_link(r);
    host.ranks = r.job.ranks.size();
    host.incomplete = r.incomplete();
    for (size_t e = 0; e < h && !host.boot_id.empty(); ++e)
      if (job.hosts[e].boot_id == host.boot_id) {
        // One monotonic clock: the earlier host's mapping is exact for this one too.
        const int keep = job.hosts[e].clock.same_boot_as >= 0 ? job.hosts[e].clock.same_boot_as : static_cast<int>(e);
        host.clock = job.hosts[e].clock;
        host.clock.method = AlignmentMethod::same_boot;
        host.clock.same_boot_as = keep;
        break;
      }
    for (const auto& rr : r.job.ranks) {
      JobRank jr;
      jr.host = h;
      jr.pid = rr.pid;
      jr.res = &rr;
      const ProcIdentity* id = r.analysis.notes.identity(rr.pid);
      if (auto g = launcher_int(id, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})) {
        jr.global_rank = *g;
        jr.rank_from_launcher = true;
      }
      jr.node = launcher_int(id, {"GROUP_RANK", "NODE_RANK", "SLURM_NODEID"}).value_or(-1);
      jr.local_rank = launcher_int(id, {"LOCAL_RANK", "SLURM_LOCALID"}).value_or(-1);
      if (auto w = launcher_int(id, {"WORLD_SIZE"})) job.world_size = std::max(job.world_size, *w);
      if (id && !id->job.empty()) {
        job_ids.insert(id->job);
        host.job_id = id->job;
      }
      job.ranks.push_back(jr);
    }
    job.hosts.push_back(std::move(host));
  }
  if (!job_ids.empty()) job.job_id = *job_ids.begin();
  if (job_ids.size() > 1)
    job.warnings.push_back(fmt::format("the captures name {} different jobs ({}, ...): are they one job?",
                                       job_ids.size(), *job_ids.begin()));
}

// Ranks without launcher variables are numbered after the known ones, nodes
// default to their host's index; then everything is sorted by global rank.
void number_ranks(JobReport& job) {
  int next = 0;
  for (const auto& r : job.ranks)
    if (r.rank_from_launcher) next = std::max(next, r.global_rank + 1);
  std::set<int> seen;
  for (auto& r : job.ranks) {
    if (!r.rank_from_launcher || !seen.insert(r.global_rank).second) {
      if (r.rank_from_launcher)
        job.warnings.push_back(fmt::format("RANK {} is claimed by more than one process (pid {} on {}); numbered {}",
                                           r.global_rank, r.pid, job.hosts[r.host].hostname, next));
      r.global_rank = next++;
      r.rank_from_launcher = false;
    }
    if (r.node < 0) r.node = static_cast<int>(r.host);
  }
  std::stable_sort(job.ranks.begin(), job.ranks.end(),
                   [](const JobRank& a, const JobRank& b) { return a.global_rank < b.global_rank; });
}

uint64_t median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct AlignedStep {
  const StepResult* st = nullptr;
  int64_t end = 0;
};

// Each rank's steps past its warm-up, with their ends on the job's time line.
std::vector<std::vector<AlignedStep>> aligned_steps(const JobReport& job, const std::vector<JobInput>& inputs) {
  std::vector<std::vector<AlignedStep>> out;
  for (const auto& r : job.ranks) {
    const HostAlignment& clk = job.hosts[r.host].clock;
    const int skip = inputs[r.host].report->job.skipped_warmup_steps;
    out.emplace_back();
    for (const auto& st : r.res->steps)
      if (st.index >= skip) out.back().push_back({&st, clk.to_job_ns(st.end_ns)});
  }
  return out;
}

// The steps one collective ends together: for each step of the rank with
// the most, every other rank's step whose end is nearest, within the
// tolerance. Rows where a rank has none are left out.
std::vector<std::vector<const StepResult*>> pair_job_steps(JobReport& job, const std::vector<JobInput>& inputs) {
  const auto steps = aligned_steps(job, inputs);
  std::vector<uint64_t> durs;
  size_t ref = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (const auto& s : steps[i]) durs.push_back(s.st->duration());
    if (steps[i].size() > steps[ref].size()) ref = i;
  }
  // Ends of one collective lie within the alignment's error of each other;
  // a quarter of a step keeps neighbours apart.
  const uint64_t typical = median(durs);
  job.pairing_tolerance_ns = std::max<uint64_t>(typical / 4, 2 * job.alignment_bound_ns + 500'000);
  std::vector<std::vector<const StepResult*>> rows;
  for (const auto& s : steps.empty() ? std::vector<AlignedStep>{} : steps[ref]) {
    std::vector<const StepResult*> row(steps.size(), nullptr);
    bool all = true;
    for (size_t i = 0; i < steps.size() && all; ++i) {
      const auto& v = steps[i];
      auto it = std::lower_bound(v.begin(), v.end(), s.end, [](const AlignedStep& a, int64_t t) { return a.end < t; });
      const AlignedStep* best = nullptr;
      uint64_t best_d = std::numeric_limits<uint64_t>::max();
      for (auto c : {it, it == v.begin() ? v.end() : std::prev(it)}) {
        if (c == v.end()) continue;
        const uint64_t d = static_cast<uint64_t>(c->end > s.end ? c->end - s.end : s.end - c->end);
        if (d < best_d) best_d = d, best = &*c;
      }
      if (best && best_d <= job.pairing_tolerance_ns) row[i] = best->st;
      else all = false;
    }
    if (all) rows.push_back(std::move(row));
  }
  return rows;
}

struct RowRule {
  uint64_t late_tolerance_ns = 0;
};

// Who arrived last in one job step, and whether it held the others back:
// the first to arrive waits about the lateness longer in the collective than
// the last (where both wait alike the skew is where the steps were cut, not
// a straggler's), and the last took longer than the first from its step's
// start to its arrival by at least half the lateness. A rank that started
// late because its previous collective ended late (a ring's last hop over a
// saturated link) and then did the same work as the others inherited its
// lateness: the collective's own phase, not a straggler's. Returns the index
// of the rank that held them back, or -1.
long judge_row(JobReport& job, const std::vector<const StepResult*>& row, const RowRule& rule, uint64_t* late_out) {
  bool have_arrival = true;
  for (const auto* st : row) have_arrival = have_arrival && st->arrival_ns != 0;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  size_t fi = 0, li = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    const StepResult& st = *row[i];
    const HostAlignment& clk = job.hosts[job.ranks[i].host].clock;
    // Without an arrival the kernel saw, the rank arrived where its own
    // work ended: the step's end less its wait in the collective.
    const int64_t a = have_arrival ? clk.to_job_ns(st.arrival_ns)
                                   : clk.to_job_ns(st.end_ns) - static_cast<int64_t>(st.ns[kColl]);
    if (a < first) first = a, fi = i;
    if (a > last) last = a, li = i;
    auto& r = job.ranks[i];
    ++r.matched_steps;
    r.step_ns_sum += st.duration();
    for (size_t c = 0; c < kCategories; ++c) r.ns[c] += st.ns[c];
  }
  const uint64_t late = static_cast<uint64_t>(last - first);
  const uint64_t c_first = row[fi]->ns[kColl], c_last = row[li]->ns[kColl];
  const bool held_back = c_first > c_last && (c_first - c_last) * 2 >= late;
  if (!held_back || late <= rule.late_tolerance_ns) return -1;
  auto start_of = [&](size_t i) { return job.hosts[job.ranks[i].host].clock.to_job_ns(row[i]->start_ns); };
  const int64_t own_first = first - start_of(fi), own_last = last - start_of(li);
  if ((own_last - own_first) * 2 < static_cast<int64_t>(late)) return -1;
  *late_out = late;
  return static_cast<long>(li);
}

// The culprit's cause: the category it spent most above the other ranks in
// the steps it held back, and the others' wait in those steps.
void explain_culprit(JobReport& job, const std::vector<std::vector<const StepResult*>>& rows,
                     const std::vector<size_t>& held_rows) {
  JobCulprit& c = job.culprit;
  CategoryNs mine{}, others{};
  uint64_t preprocess = 0, storage = 0, victim_wait = 0;
  const size_t n_others = job.ranks.size() - 1;
  for (size_t k : held_rows) {
    const auto& row = rows[k];
    for (size_t i = 0; i < row.size(); ++i)
      for (size_t cat = 0; cat < kCategories; ++cat) (i == c.rank ? mine : others)[cat] += row[i]->ns[cat];
    preprocess += row[c.rank]->data_preprocess_ns;
    storage += row[c.rank]->data_storage_ns;
    for (size_t i = 0; i < row.size(); ++i)
      if (i != c.rank) victim_wait += row[i]->ns[kColl];
  }
  const double n = static_cast<double>(held_rows.size());
  double best = 0;
  for (size_t cat = 0; cat < kCategories; ++cat) {
    if (cat == kColl) continue;
    const double excess = (static_cast<double>(mine[cat]) - static_cast<double>(others[cat]) / static_cast<double>(n_others)) / n;
    if (excess > best) best = excess, c.cause = static_cast<Category>(cat);
  }
  c.cause_excess_ns = static_cast<uint64_t>(best);
  if (c.cause == Category::data_loading && preprocess + storage > 0)
    c.cause_detail = preprocess >= storage ? "the loaders' CPU preprocessing" : "the loaders' storage reads";
  c.victim_wait_ns = static_cast<uint64_t>(static_cast<double>(victim_wait) / (n * static_cast<double>(n_others)));
  for (size_t i = 0; i < job.ranks.size(); ++i)
    if (i != c.rank) c.victims.push_back(i);
}

void find_culprit(JobReport& job, const std::vector<std::vector<const StepResult*>>& rows) {
  std::vector<uint64_t> durs;
  for (const auto& row : rows)
    for (const auto* st : row) durs.push_back(st->duration());
  RowRule rule;
  rule.late_tolerance_ns = std::max({uint64_t{1'000'000}, median(durs) / 20, 2 * job.alignment_bound_ns});
  std::vector<std::vector<size_t>> held(job.ranks.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    uint64_t late = 0;
    const long who = judge_row(job, rows[k], rule, &late);
    if (who < 0) continue;
    auto& r = job.ranks[static_cast<size_t>(who)];
    ++r.last_steps;
    r.late_ns_sum += late;
    held[static_cast<size_t>(who)].push_back(k);
  }
  job.job_steps = rows.size();
  size_t best = 0;
  for (size_t i = 1; i < job.ranks.size(); ++i)
    if (job.ranks[i].last_steps > job.ranks[best].last_steps) best = i;
  if (job.ranks.size() < 2) return;
  const auto& b = job.ranks[best];
  // A culprit holds the others back in a good part of the steps, not now and then.
  if (b.last_steps < 3 || b.last_steps * 10 < rows.size() * 3) return;
  job.culprit.found = true;
  job.culprit.rank = best;
  job.culprit.last_steps = b.last_steps;
  job.culprit.mean_late_ns = b.late_ns_sum / b.last_steps;
  explain_culprit(job, rows, held[best]);
}

void summarize_nodes(JobReport& job) {
  std::map<int, NodeSummary> nodes;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const auto& r = job.ranks[i];
    auto& n = nodes[r.node];
    n.node = r.node;
    n.ranks.push_back(i);
    if (std::find(n.hosts.begin(), n.hosts.end(), r.host) == n.hosts.end()) n.hosts.push_back(r.host);
    n.last_steps += r.last_steps;
  }
  for (auto& [id, n] : nodes) {
    uint64_t steps = 0, step_ns = 0, coll = 0;
    for (size_t i : n.ranks) {
      steps += job.ranks[i].matched_steps;
      step_ns += job.ranks[i].step_ns_sum;
      coll += job.ranks[i].ns[kColl];
    }
    if (steps) n.mean_step_ns = step_ns / steps, n.mean_collective_ns = coll / steps;
    job.nodes.push_back(n);
  }
}

std::string ms(uint64_t ns) { return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6); }

void write_headline(JobReport& job) {
  CategoryNs all{};
  uint64_t total = 0;
  for (const auto& r : job.ranks)
    for (size_t c = 0; c < kCategories; ++c) all[c] += r.ns[c], total += r.ns[c];
  job.common_category = static_cast<Category>(std::max_element(all.begin(), all.end()) - all.begin());
  const double share = total ? 100.0 * static_cast<double>(all[static_cast<size_t>(job.common_category)]) /
                                   static_cast<double>(total)
                             : 0;
  if (!job.culprit.found) {
    job.headline = job.job_steps == 0
                       ? "no step could be paired across the ranks: the captures may not overlap in time"
                       : fmt::format("no rank holds the others back; the ranks' time goes mostly to {} ({:.0f} %)",
                                     category_name(job.common_category), share);
    return;
  }
  const JobCulprit& c = job.culprit;
  const JobRank& r = job.ranks[c.rank];
  const JobHost& h = job.hosts[r.host];
  job.headline = fmt::format("rank {} on node {} ({}) holds the job back: {}{}", r.global_rank, r.node, h.hostname,
                             category_name(c.cause), c.cause_detail.empty() ? "" : " (" + c.cause_detail + ")");
  std::vector<int> victims, victim_nodes;
  for (size_t i : c.victims) victims.push_back(job.ranks[i].global_rank), victim_nodes.push_back(job.ranks[i].node);
  job.evidence.push_back(fmt::format("ranks {} on node(s) {} wait {}/step in the collective for rank {} on node {}",
                                     rank_ranges(victims), rank_ranges(victim_nodes), ms(c.victim_wait_ns),
                                     r.global_rank, r.node));
  job.evidence.push_back(fmt::format("rank {} arrives last at the collective in {} of {} paired steps, {} late on "
                                     "average; its {} is {}/step above the other ranks' mean",
                                     r.global_rank, c.last_steps, job.job_steps, ms(c.mean_late_ns),
                                     category_name(c.cause), ms(c.cause_excess_ns)));
}

void check_coverage(JobReport& job) {
  if (job.world_size > 0 && job.ranks.size() < static_cast<size_t>(job.world_size))
    job.warnings.push_back(fmt::format("WORLD_SIZE is {} but the captures hold {} rank(s): the ranks missing here "
                                       "may hold the job back too",
                                       job.world_size, job.ranks.size()));
  for (const auto& h : job.hosts)
    if (h.clock.method == AlignmentMethod::none)
      job.warnings.push_back(fmt::format("{}: no clock anchors and no wall-clock offset: its times are used as they "
                                         "are (right only on the same boot as the others)",
                                         h.path));
}

// Each host's clock by its anchors, then by the bytes it exchanged with the
// others where it did; the job's bound between any two hosts.
void align_clocks(JobReport& job, const std::vector<JobInput>& inputs) {
  std::vector<HostAlignment> clocks;
  std::vector<const StreamMarks*> marks;
  for (size_t h = 0; h < job.hosts.size(); ++h) {
    clocks.push_back(job.hosts[h].clock);
    const StreamMarks& m = inputs[h].report->analysis.streams;
    marks.push_back(m.enabled() ? &m : nullptr);
  }
  std::vector<std::string> why_not;
  refine_by_streams(clocks, marks, why_not);
  std::vector<uint64_t> net_bounds;  // each host's against the reference
  std::vector<int64_t> wall_errors_us;
  bool wall_errors_known = true;
  for (size_t h = 0; h < job.hosts.size(); ++h) {
    JobHost& host = job.hosts[h];
    host.clock = clocks[h];
    host.network_why_not = why_not[h];
    if (host.clock.method == AlignmentMethod::same_boot) continue;
    ++job.wall_clock_hosts;
    job.alignment_bound_ns = std::max(job.alignment_bound_ns, host.clock.reading_bound_ns);
    if (host.clock.method == AlignmentMethod::network) net_bounds.push_back(host.clock.net_bound_ns);
    if (host.clock.wall_unsynced) job.unsynced_hosts.push_back(h);
    wall_errors_known = wall_errors_known && !host.clock.wall_unsynced && host.clock.wall_max_error_us >= 0;
    wall_errors_us.push_back(host.clock.wall_max_error_us);
  }
  // Two hosts on their own clocks: each one's anchor bound adds up.
  if (job.wall_clock_hosts > 1) job.alignment_bound_ns *= 2;
  else job.alignment_bound_ns = 0;
  job.reading_bound_ns = job.alignment_bound_ns;
  if (job.wall_clock_hosts > 1 && wall_errors_known) {
    std::sort(wall_errors_us.rbegin(), wall_errors_us.rend());
    job.wall_clock_bound_ns =
        static_cast<int64_t>(job.reading_bound_ns) + (wall_errors_us[0] + wall_errors_us[1]) * 1000;
  }
  // Every host but the reference fitted by the network: the bound between
  // two of them is at most the sum of their bounds against the reference.
  job.network_aligned = job.wall_clock_hosts > 1 && net_bounds.size() + 1 == job.wall_clock_hosts;
  if (job.network_aligned) {
    std::sort(net_bounds.rbegin(), net_bounds.rend());
    job.alignment_bound_ns = net_bounds[0] + (net_bounds.size() > 1 ? net_bounds[1] : 0);
  }
}

}  // namespace

JobReport merge_job(const std::vector<JobInput>& inputs) {
  JobReport job;
  collect(inputs, job);
  number_ranks(job);
  align_clocks(job, inputs);
  const auto rows = pair_job_steps(job, inputs);
  find_culprit(job, rows);
  summarize_nodes(job);
  write_headline(job);
  link_evidence(job);
  check_coverage(job);
  return job;
}

std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace steptrace
