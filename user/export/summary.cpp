// SPDX-License-Identifier: Apache-2.0
#include "export/summary.h"

#include "attribution/host_steals.h"
#include "export/profile_view.h"
#include "export/provenance.h"
#include "export/report_stats.h"
#include "export/what_if_view.h"
#include "util/text.h"

#include <fmt/core.h>

#include "signals/signals_json.h"

#include <algorithm>
#include <vector>

namespace steptrace {
namespace {
nlohmann::json host_steals_json(const HostSteals& hs) {
  using nlohmann::json;
  json steal_ranks = json::array(), steal_findings = json::array();
  for (const auto& s : hs.ranks)
    steal_ranks.push_back({{"rank", s.rank},
                           {"steps", s.steps},
                           {"step_ns", s.step_ns},
                           {"throttled_ns", s.throttled_ns},
                           {"throttled_wait_ns", s.throttled_wait_ns},
                           {"data_throttled_ns", s.data_throttled_ns},
                           {"data_reclaim_ns", s.data_reclaim_ns},
                           {"loader_reclaim_ns", s.loader_reclaim_ns},
                           {"reclaim_ns", s.reclaim_ns},
                           {"irq_ns", s.irq_ns},
                           {"softirq_ns", s.softirq_ns},
                           {"softirq_vectors", softirq_vec_names(s.softirq_vecs)},
                           {"on_cpu_ns", s.on_cpu_ns},
                           {"remote_node_ns", s.remote_node_ns},
                           {"device", s.device},
                           {"device_node", s.device_node},
                           {"device_bdf", s.device_bdf}});
  for (const auto& f : hs.findings)
    steal_findings.push_back({{"cause", std::string(steal_cause_name(f.cause))},
                              {"within", std::string(category_name(f.within))},
                              {"ranks", f.ranks},
                              {"ns_per_step", f.ns_per_step},
                              {"share", f.share},
                              {"text", f.text},
                              {"recommendation", f.recommendation}});
  return {{"ranks", steal_ranks}, {"findings", steal_findings}};
}
}  // namespace

nlohmann::json job_json(const JobAnalysis& job) {
  using nlohmann::json;
  auto cats = [](const CategoryNs& ns) {
    json j = json::object();
    for (size_t c = 0; c < kCategories; ++c) j[std::string(kCategoryNames[c])] = ns[c];
    return j;
  };
  const auto& v = job.verdict;
  json shares = json::object();
  for (size_t c = 0; c < kCategories; ++c) shares[std::string(kCategoryNames[c])] = job.mean_share[c];
  json verdict = {{"category", std::string(category_name(v.category))},
                  {"headline", v.headline},
                  {"confidence", v.confidence},
                  {"evidence", v.evidence},
                  {"recommendation", v.recommendation},
                  {"incomplete", v.incomplete},
                  {"straggler_rank", v.straggler_rank},
                  {"straggler_late_ns", v.straggler_late_ns},
                  {"straggler_cause", std::string(category_name(v.straggler_cause))}};
  json ranks = json::array();
  for (const auto& r : job.ranks) {
    json steps = json::array();
    for (const auto& st : r.steps)
      steps.push_back({{"index", st.index},
                       {"start_ns", st.start_ns},
                       {"end_ns", st.end_ns},
                       {"duration_ns", st.duration()},
                       {"categories", cats(st.ns)},
                       {"data_storage_ns", st.data_storage_ns},
                       {"data_preprocess_ns", st.data_preprocess_ns},
                       {"collective_on_cpu_ns", st.collective_on_cpu_ns},
                       {"throttled_ns", st.throttled_ns},
                       {"throttled_wait_ns", st.throttled_wait_ns},
                       {"data_throttled_ns", st.data_throttled_ns},
                       {"data_reclaim_ns", st.data_reclaim_ns},
                       {"loader_reclaim_ns", st.loader_reclaim_ns},
                       {"reclaim_ns", st.reclaim_ns},
                       {"irq_ns", st.irq_ns},
                       {"softirq_ns", st.softirq_ns},
                       {"on_cpu_ns", st.on_cpu_ns},
                       {"remote_node_ns", st.remote_node_ns},
                       {"arrival_ns", st.arrival_ns},
                       {"late_ns", st.late_ns},
                       {"copy_bytes", st.copy_bytes},
                       {"fabric_calls", st.fabric_calls},
                       {"fabric_ns", st.fabric_ns},
                       {"fabric_reg_bytes", st.fabric_reg_bytes},
                       {"gating", std::string(category_name(st.gating))},
                       {"device", signals::step_to_json(st.dev)}});
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"main_tid", r.main_tid},
                     {"comm", r.comm},
                     {"step_source", step_source_name(r.source)},
                     {"loader_pids", r.loader_pids},
                     {"straggler_steps", r.straggler_steps},
                     {"steps_total", r.steps_total},
                     {"counted_steps", r.counted_steps},
                     {"totals", cats(r.total)},
                     {"counted_ns", r.counted_ns},
                     {"steps", steps}});
  }
  auto phase = [](const FabricPhase& p) {
    json verbs = json::array();
    for (const auto& v : p.verbs)
      verbs.push_back({{"name", v.name},
                       {"group", std::string(verb_group_name(v.group))},
                       {"calls", v.calls},
                       {"errors", v.errors},
                       {"total_ns", v.total_ns},
                       {"max_ns", v.max_ns},
                       {"bytes", v.bytes}});
    return json{{"calls", p.calls}, {"errors", p.errors}, {"total_ns", p.total_ns}, {"bytes", p.bytes},
                {"first_ns", p.first_ns}, {"last_ns", p.last_ns}, {"verbs", verbs}};
  };
  json fabric = json::array();
  for (const auto& f : job.fabric.ranks)
    fabric.push_back({{"rank", f.rank},
                      {"pid", f.pid},
                      {"setup", phase(f.setup)},
                      {"in_steps", phase(f.in_steps)},
                      {"teardown", phase(f.teardown)},
                      {"counted_steps", f.counted_steps},
                      {"counted_steps_with_calls", f.counted_steps_with_calls}});
  json changes = json::array();
  for (const auto& c : job.changes)
    changes.push_back({{"at_ns", c.at_ns},
                       {"step", c.step},
                       {"reference_rank", c.reference_rank},
                       {"ranks", c.ranks},
                       {"before_ms", c.before_ms},
                       {"after_ms", c.after_ms},
                       {"change_pct", c.change_pct()},
                       {"score", c.score},
                       {"cause_rank", c.cause_rank},
                       {"cause", std::string(category_name(c.cause))},
                       {"cause_delta_ms", c.cause_delta_ms},
                       {"text", describe_change(c)}});
  return {{"verdict", verdict},
          {"mean_share", shares},
          {"skipped_warmup_steps", job.skipped_warmup_steps},
          {"ranks", ranks},
          {"device_signals", signals::summary_to_json(job.signals)},
          {"efa_control_path", fabric},
          {"changes", changes},
          {"what_if", what_if_json(job.what_if)},
          {"host_steals", host_steals_json(job.host_steals)}};
}

nlohmann::json summary_json(const SessionReport& r) {
  using nlohmann::json;
  json j;
  j["schema"] = "steptrace.summary/1";
  j["window"] = {{"start_ns", r.window_start_ns}, {"end_ns", r.window_end_ns}, {"wall_s", r.wall_s}};
  const WindowStats& w = r.windows;
  j["memory"] = {{"fold_every_s", static_cast<double>(w.fold_every_ns) / 1e9},
                 {"max_memory_bytes", w.max_memory_bytes},
                 {"folds", w.folds},
                 {"memory_cap_hits", w.memory_cap_hits},
                 {"memory_cap_forgets", w.memory_cap_forgets},
                 {"steps_out_of_detail", w.steps_out_of_detail},
                 {"peak_memory_bytes", w.peak_memory_bytes},
                 {"exited_threads_summed", r.analysis.threads.folded_threads()},
                 {"closed_sockets_summed", r.analysis.collectors.folded_sock_count}};
  j["records"] = r.records;
  j["cpu_profile"] = profile_json(r, named_stacks(r));
  j["incomplete"] = r.incomplete();
  if (!r.capture_end.empty()) j["capture_end"] = r.capture_end;
  j["job_exit_code"] = r.job_exit_code;
  if (!r.job_outcome.empty()) j["job_outcome"] = r.job_outcome;
  if (!r.end_reason.empty()) j["end_reason"] = r.end_reason;
  json kinds = json::object();
  for (int k = 1; k < ST_EV_KIND_MAX; ++k)
    kinds[std::string(kind_name(static_cast<uint32_t>(k)))] = {{"emitted", r.drops.emitted[k]},
                                                               {"dropped", r.drops.dropped[k]}};
  j["events"] = kinds;
  json losses = json::object();
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    losses[std::string(loss_name(k))] = {
        {"count", r.drops.losses[k]},
        {"affects_attribution", loss_affects_attribution(k)},
        {"measurable", !(k == ST_LOSS_KRETPROBE_MISSED && r.drops.kretprobe == LossMeasure::not_measurable)}};
  j["losses"] = losses;
  j["decode"] = {{"unknown_kind", r.decode.unknown_kind}, {"bad_size", r.decode.bad_size}};
  json threads = json::array();
  for (const auto* t : sorted_threads(r)) {
    json wakers = json::array();
    for (const auto& [wtid, w] : t->wakers)
      wakers.push_back({{"tid", wtid}, {"pid", w.waker_pid}, {"comm", w.waker_comm}, {"count", w.count},
                        {"blocked_ns", w.blocked_ns}});
    threads.push_back({{"pid", t->pid},
                       {"tid", t->tid},
                       {"comm", t->comm},
                       {"running_ns", t->ns(ThreadState::running)},
                       {"runnable_ns", t->ns(ThreadState::runnable)},
                       {"sleeping_ns", t->ns(ThreadState::sleeping)},
                       {"disk_wait_ns", t->ns(ThreadState::disk_wait)},
                       {"preempted", t->preempted},
                       {"yields", t->yields},
                       {"exited", t->exited},
                       {"wakers", wakers}});
  }
  j["threads"] = threads;
  const auto& c = r.analysis.collectors;
  json accel = json::array();
  for (const auto& [cmd, s] : c.accel_by_cmd)
    accel.push_back({{"cmd", cmd}, {"name", neuron_cmd_name(cmd)}, {"count", s.agg.count},
                     {"total_ns", s.agg.total_ns}, {"max_ns", s.agg.max_ns}, {"bytes", s.agg.bytes},
                     {"errors", s.errors}});
  j["accel_ioctls"] = accel;
  json block = json::array();
  for (const auto& [k, a] : c.block)
    block.push_back({{"dev", format_dev(k.dev)}, {"tid", k.tid}, {"op", k.write ? "write" : "read"},
                     {"count", a.count}, {"bytes", a.bytes}, {"total_ns", a.total_ns}, {"max_ns", a.max_ns}});
  j["block"] = block;
  json socks = json::array();
  for (const auto& [id, s] : c.socks)
    socks.push_back({{"socket", format_tuple(s.tuple)}, {"pid", s.pid}, {"sent", s.send.bytes},
                     {"received", s.recv.bytes}, {"recv_ns", s.recv.total_ns}, {"send_ns", s.send.total_ns},
                     {"retransmits", s.retransmits}, {"state_changes", s.state_changes}});
  j["tcp"] = socks;
  json tiers = json::object();
  for (const auto& t : r.tiers) tiers[t.collector] = t.tier;
  j["attach_tiers"] = tiers;
  j["tracer"] = {{"cpu_s", r.tracer_cpu_s}, {"ring_mib", r.ring_mib}, {"drain_ms", r.drain_ms}};
  j["warnings"] = r.warnings;
  j["hangs"] = nlohmann::json::array();
  for (const auto& h : r.hangs) j["hangs"].push_back(hang_json(h));
  j["runtime_libs"] = r.runtime_libs;
  j["job"] = job_json(r.job);
  j["source"] = provenance_json(r);
  for (size_t i = 0; i < r.job.ranks.size() && i < j["job"]["ranks"].size(); ++i) {
    auto& rj = j["job"]["ranks"][i];
    rj["identity"] = rank_identity_json(r.job.ranks[i], r.analysis);
    rj["step_source_reason"] = step_source_reason(r.job.ranks[i], r.analysis.notes);
  }
  return j;
}

}  // namespace steptrace
