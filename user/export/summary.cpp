// SPDX-License-Identifier: Apache-2.0
#include "export/summary.h"
#include "util/text.h"

#include <fmt/core.h>

#include "signals/signals_json.h"

#include <algorithm>
#include <vector>

namespace steptrace {
namespace {

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

std::vector<const ThreadInfo*> sorted_threads(const SessionReport& r) {
  std::vector<const ThreadInfo*> v;
  for (const auto& [tid, t] : r.analysis.threads.threads()) v.push_back(&t);
  std::sort(v.begin(), v.end(), [](const ThreadInfo* a, const ThreadInfo* b) {
    return a->pid != b->pid ? a->pid < b->pid : a->tid < b->tid;
  });
  return v;
}


double pct(double v, double of) { return of > 0 ? 100.0 * v / of : 0.0; }

uint64_t percentile(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

const char* short_name(size_t c) {
  static const char* n[] = {"DEVICE", "DATA", "DMA", "COLL", "HOST", "CONTEND", "OTHER"};
  return n[c];
}

std::string format_job_text(const JobAnalysis& job) {
  std::string o;
  const auto& v = job.verdict;
  o += fmt::format("VERDICT: {}{}\n", v.headline, v.incomplete ? " [INCOMPLETE]" : "");
  if (!job.ranks.empty()) {
    o += fmt::format("  confidence {:.0f}%  ->  {}\n", 100 * v.confidence, v.recommendation);
    o += "Evidence:\n";
    for (const auto& e : v.evidence) o += fmt::format("  - {}\n", e);
    o += "\nRanks (share of step, counted steps)\n";
    o += fmt::format("{:>4} {:>7} {:>7} {:>5} {:>8}", "RANK", "PID", "MAIN", "STEPS", "MEAN ms");
    for (size_t c = 0; c < kCategories; ++c) o += fmt::format(" {:>7}", short_name(c));
    o += "\n";
    for (const auto& r : job.ranks) {
      int n = 0;
      for (const auto& st : r.steps) n += st.index >= job.skipped_warmup_steps;
      o += fmt::format("{:>4} {:>7} {:>7} {:>5} {:>8.1f}", r.rank, r.pid, r.main_tid, r.steps.size(),
                       n ? static_cast<double>(r.counted_ns) / n / 1e6 : 0.0);
      for (size_t c = 0; c < kCategories; ++c)
        o += fmt::format(" {:>6.1f}%", pct(static_cast<double>(r.total[c]), static_cast<double>(r.counted_ns)));
      if (r.rank == v.straggler_rank) o += "  <- straggler";
      o += "\n";
    }
    const auto& r0 = job.ranks.front();
    o += fmt::format("\nSteps of rank {} (ms; steps from {})\n", r0.rank, step_source_name(r0.source));
    o += fmt::format("{:>5} {:>8}", "STEP", "DUR");
    for (size_t c = 0; c < kCategories; ++c) o += fmt::format(" {:>7}", short_name(c));
    o += "  GATING\n";
    size_t shown = 0;
    for (const auto& st : r0.steps) {
      if (r0.steps.size() > 24 && shown >= 10 && shown + 10 < r0.steps.size()) {
        if (shown == 10) o += fmt::format("{:>5}\n", "...");
        ++shown;
        continue;
      }
      ++shown;
      o += fmt::format("{:>5} {:>8.2f}", st.index, static_cast<double>(st.duration()) / 1e6);
      for (size_t c = 0; c < kCategories; ++c) o += fmt::format(" {:>7.2f}", static_cast<double>(st.ns[c]) / 1e6);
      o += fmt::format("  {}\n", category_name(st.gating));
    }
    o += "\nPercentiles over all ranks' counted steps (ms)\n";
    o += fmt::format("{:<16} {:>8} {:>8} {:>8} {:>8}\n", "CATEGORY", "p50", "p90", "p99", "max");
    std::vector<uint64_t> durs;
    std::array<std::vector<uint64_t>, kCategories> per;
    for (const auto& r : job.ranks)
      for (const auto& st : r.steps) {
        if (st.index < job.skipped_warmup_steps) continue;
        durs.push_back(st.duration());
        for (size_t c = 0; c < kCategories; ++c) per[c].push_back(st.ns[c]);
      }
    auto row = [&](const std::string& name, const std::vector<uint64_t>& v) {
      o += fmt::format("{:<16} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f}\n", name, percentile(v, 0.5) / 1e6,
                       percentile(v, 0.9) / 1e6, percentile(v, 0.99) / 1e6, percentile(v, 1.0) / 1e6);
    };
    row("step", durs);
    for (size_t c = 0; c < kCategories; ++c) row(std::string(kCategoryNames[c]), per[c]);
  }
  return o;
}

}  // namespace

std::string format_summary_text(const SessionReport& r) {
  std::string o = format_job_text(r.job);
  o += fmt::format("\nsteptrace: {:.2f} s traced, {} records, {} dropped{}\n", r.wall_s, r.records,
                   r.drops.total_dropped(),
                   r.drops.incomplete() ? " (INCOMPLETE: " + incomplete_reason(r.drops) + ")" : "");
  if (!r.capture_end.empty()) o += fmt::format("INCOMPLETE: the capture ended early ({})\n", r.capture_end);
  o += "\nThreads (ms)\n";
  o += fmt::format("{:>7} {:>7} {:<16} {:>9} {:>9} {:>9} {:>9} {:>6} {:>7}  {}\n", "PID", "TID", "COMM", "ON-CPU",
                   "RUNNABLE", "SLEEP", "D-WAIT", "PREEMPT", "YIELDS", "TOP WAKER");
  for (const auto* t : sorted_threads(r)) {
    std::string waker;
    uint64_t best = 0;
    for (const auto& [wtid, w] : t->wakers) {
      if (w.count > best) {
        best = w.count;
        waker = fmt::format("{}/{} x{} ({:.1f} ms)", w.waker_comm, wtid, w.count, ms(w.blocked_ns));
      }
    }
    o += fmt::format("{:>7} {:>7} {:<16} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>6} {:>7}  {}\n", t->pid, t->tid,
                     utf8_prefix(t->comm, 16), ms(t->ns(ThreadState::running)), ms(t->ns(ThreadState::runnable)),
                     ms(t->ns(ThreadState::sleeping)), ms(t->ns(ThreadState::disk_wait)), t->preempted, t->yields,
                     waker);
  }
  const auto& c = r.analysis.collectors;
  if (!c.accel_by_cmd.empty()) {
    o += "\nAccelerator ioctls\n";
    o += fmt::format("{:<28} {:>8} {:>10} {:>10} {:>12}\n", "COMMAND", "COUNT", "TOTAL ms", "MAX ms", "BYTES");
    for (const auto& [cmd, s] : c.accel_by_cmd)
      o += fmt::format("{:<28} {:>8} {:>10.2f} {:>10.2f} {:>12}\n", neuron_cmd_name(cmd), s.agg.count,
                       ms(s.agg.total_ns), ms(s.agg.max_ns), s.agg.bytes);
  }
  if (!c.block.empty()) {
    o += "\nBlock I/O (issue -> complete)\n";
    o += fmt::format("{:<8} {:>7} {:<5} {:>8} {:>12} {:>9} {:>9}\n", "DEV", "TID", "OP", "COUNT", "BYTES", "AVG ms",
                     "MAX ms");
    for (const auto& [k, a] : c.block)
      o += fmt::format("{:<8} {:>7} {:<5} {:>8} {:>12} {:>9.3f} {:>9.3f}\n", format_dev(k.dev), k.tid,
                       k.write ? "write" : "read", a.count, a.bytes, a.count ? ms(a.total_ns) / a.count : 0.0,
                       ms(a.max_ns));
  }
  if (!c.socks.empty()) {
    o += "\nTCP sockets\n";
    o += fmt::format("{:<44} {:>12} {:>12} {:>10} {:>6}\n", "SOCKET", "SENT", "RECEIVED", "RECV ms", "RETX");
    for (const auto& [id, s] : c.socks)
      o += fmt::format("{:<44} {:>12} {:>12} {:>10.2f} {:>6}\n", format_tuple(s.tuple), s.send.bytes, s.recv.bytes,
                       ms(s.recv.total_ns), s.retransmits);
  }
  o += "\nEvents by kind (emitted / dropped in kernel)\n";
  for (int k = 1; k < ST_EV_KIND_MAX; ++k) {
    if (r.drops.emitted[k] == 0 && r.drops.dropped[k] == 0) continue;
    o += fmt::format("  {:<16} {:>10} / {}\n", kind_name(static_cast<uint32_t>(k)), r.drops.emitted[k],
                     r.drops.dropped[k]);
  }
  if (r.decode.unknown_kind || r.decode.bad_size)
    o += fmt::format("  undecodable: {} unknown kind, {} bad size\n", r.decode.unknown_kind, r.decode.bad_size);
  o += "\nLosses in the kernel (state a collector could not keep)\n";
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) {
    if (k == ST_LOSS_KRETPROBE_MISSED && r.drops.kretprobe == LossMeasure::not_measurable) {
      o += fmt::format("  {:<18} not measurable on this kernel (< 6.7)\n", loss_name(k));
      continue;
    }
    o += fmt::format("  {:<18} {:>10}{}\n", loss_name(k), r.drops.losses[k],
                     r.drops.losses[k] ? fmt::format("  {}", loss_text(k)) : "");
  }
  o += "\nAttach tiers\n";
  for (const auto& t : r.tiers) o += fmt::format("  {:<8} {}\n", t.collector, t.tier);
  o += fmt::format("\nTracer: {:.3f} s CPU ({:.2f}% of one core), ring {} MiB drained every {} ms\n", r.tracer_cpu_s,
                   r.wall_s > 0 ? 100.0 * r.tracer_cpu_s / r.wall_s : 0.0, r.ring_mib, r.drain_ms);
  for (const auto& w : r.warnings) o += fmt::format("warning: {}\n", w);
  return o;
}

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
  return {{"verdict", verdict}, {"mean_share", shares}, {"skipped_warmup_steps", job.skipped_warmup_steps},
          {"ranks", ranks}, {"device_signals", signals::summary_to_json(job.signals)},
          {"efa_control_path", fabric}};
}

nlohmann::json summary_json(const SessionReport& r) {
  using nlohmann::json;
  json j;
  j["schema"] = "steptrace.summary/1";
  j["window"] = {{"start_ns", r.window_start_ns}, {"end_ns", r.window_end_ns}, {"wall_s", r.wall_s}};
  j["records"] = r.records;
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
  j["runtime_libs"] = r.runtime_libs;
  j["job"] = job_json(r.job);
  return j;
}

}  // namespace steptrace
