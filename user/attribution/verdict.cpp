// SPDX-License-Identifier: Apache-2.0
#include "attribution/verdict.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "timeline/collector_stats.h"

namespace steptrace {
namespace {

// A straggler's peers spend at least this much more of their step in the
// collective than it does (find_straggler).
constexpr double kMinPeersWait = 0.05;

double ms(double ns) { return ns / 1e6; }

struct PerStep {
  double step_ns = 0;
  std::array<double, kCategories> ns{};
  double copy_bytes = 0, copies = 0, storage_ns = 0, preprocess_ns = 0;
  int steps = 0;
};

PerStep per_step(const JobAnalysis& job, int only_rank = -1) {
  PerStep p;
  for (const auto& r : job.ranks) {
    if (only_rank >= 0 && r.rank != only_rank) continue;
    for (const auto& st : r.steps) {
      if (st.index < job.skipped_warmup_steps) continue;
      ++p.steps;
      p.step_ns += static_cast<double>(st.duration());
      for (size_t c = 0; c < kCategories; ++c) p.ns[c] += static_cast<double>(st.ns[c]);
      p.copy_bytes += static_cast<double>(st.copy_bytes);
      p.copies += st.copies;
      p.storage_ns += static_cast<double>(st.data_storage_ns);
      p.preprocess_ns += static_cast<double>(st.data_preprocess_ns);
    }
  }
  if (p.steps) {
    double n = p.steps;
    p.step_ns /= n;
    for (auto& v : p.ns) v /= n;
    p.copy_bytes /= n;
    p.copies /= n;
    p.storage_ns /= n;
    p.preprocess_ns /= n;
  }
  return p;
}

const char* recommendation_for(Category c) {
  switch (c) {
    case Category::device_execute:
      return "the accelerator is the bottleneck: tune the model on the device (compiler flags, batch size); the host keeps up";
    case Category::data_loading:
      return "feed the accelerator faster: more DataLoader workers, cheaper preprocessing, or faster/cached storage";
    case Category::dma_submission:
      return "batch host-to-device copies into fewer, larger transfers (or keep inputs on the device)";
    case Category::collective:
      return "check the network path and rank balance: look at the straggler, link rate and gradient size";
    case Category::host_overhead:
      return "profile the host code between device calls (Python overhead, optimizer, logging); overlap it with execution";
    case Category::cpu_contention:
      return "give the training threads their own CPUs: move or cap the competing processes, pin the job";
    default: return "look at the per-thread timeline: the time is not explained by the known categories";
  }
}

// Advice aimed at the straggler's own cause: the other ranks only wait for it.
std::string straggler_recommendation(int rank, Category cause) {
  std::string fix;
  switch (cause) {
    case Category::data_loading:
      fix = fmt::format("feed rank {} faster: more DataLoader workers or CPU cores for its loaders, cheaper transforms "
                        "or faster/cached storage on that rank", rank);
      break;
    case Category::cpu_contention:
      fix = fmt::format("give rank {}'s threads their own CPUs: move or cap what competes with it on its node, pin "
                        "the job", rank);
      break;
    case Category::host_overhead:
      fix = fmt::format("profile rank {}'s host code between device calls: it does more host work than the others "
                        "(uneven batches, logging or checkpointing on that rank)", rank);
      break;
    case Category::dma_submission:
      fix = fmt::format("batch rank {}'s host-to-device copies into fewer, larger transfers", rank);
      break;
    default:
      fix = fmt::format("look at rank {}'s timeline: its delay is not explained by the host-side categories", rank);
  }
  return fix + "; the other ranks wait for it in the collective, so the network is not where to start";
}

// A rank's share of its counted steps' time in category c.
double share_of(const RankResult& r, Category c) {
  uint64_t all = 0;
  for (uint64_t ns : r.total) all += ns;
  return all ? static_cast<double>(r.total[static_cast<size_t>(c)]) / static_cast<double>(all) : 0.0;
}

// How much more of their steps the other ranks spend in the collective than
// r does, on average: what r's lateness costs them.
double peers_wait_more(const JobAnalysis& job, const RankResult& r) {
  double others = 0;
  int n = 0;
  for (const auto& o : job.ranks)
    if (&o != &r) {
      others += share_of(o, Category::collective);
      ++n;
    }
  return n ? others / n - share_of(r, Category::collective) : 0.0;
}

// Lateness of a rank in the counted steps (kept in detail) in which it held
// the others back.
uint64_t held_back_ns(const JobAnalysis& job, const RankResult& r) {
  uint64_t ns = 0;
  for (const auto& st : r.steps)
    if (st.straggler && st.index >= job.skipped_warmup_steps) ns += st.late_ns;
  return ns;
}

// Straggler: the rank that holds the others back - last at the collective,
// late, in more than half the counted steps, with two thirds or more of
// every rank's lateness in such steps; or in at least a quarter of
// them while its lateness is two thirds or more of every rank's lateness in
// such steps (a DataLoader with two workers makes every other batch late: the
// slow rank was last, 300 ms late, in half the steps and the other rank 20
// ms late in the rest) and that lateness is a tenth of the step or more.
// Sets v.straggler_*. Returns the candidate (null without ranks).
const RankResult* find_straggler(const JobAnalysis& job, Verdict& v) {
  const RankResult* strag = nullptr;
  for (const auto& r : job.ranks)
    if (!strag || r.straggler_steps > strag->straggler_steps) strag = &r;
  const uint64_t counted = job.ranks.empty() ? 0 : job.ranks.front().counted_steps;
  uint64_t all_held_back = 0;
  for (const auto& r : job.ranks) all_held_back += held_back_ns(job, r);
  // Last in most steps, and most of the lateness that held anyone back is
  // its own: in a symmetric job each rank is late by chance in some steps,
  // and one of two can be last in just over half of them (one run in 20 of
  // a two-rank DDP job named a rank although, by the job's own timers, both
  // waited alike in the all-reduce: 29 % and 28 % of the step).
  bool holds_back = strag && counted > 0 && strag->straggler_steps * 2 > counted &&
                    held_back_ns(job, *strag) * 3 >= all_held_back * 2;
  if (!holds_back)  // the candidate for the rule below: the rank whose lateness held the others back most
    for (const auto& r : job.ranks)
      if (held_back_ns(job, r) > held_back_ns(job, *strag)) strag = &r;
  if (strag && counted > 0 && !holds_back && strag->straggler_steps * 4 >= counted) {
    const uint64_t all = all_held_back;
    uint64_t steps_ns = 0, n = 0;
    for (const auto& r : job.ranks) {
      for (const auto& st : r.steps)
        if (st.index >= job.skipped_warmup_steps) {
          steps_ns += st.duration();
          ++n;
        }
    }
    // ... and costs the others a tenth of the step or more, over all counted
    // steps (a symmetric job's chance lateness came to 4 %).
    const uint64_t own = held_back_ns(job, *strag);
    uint64_t own_steps = 0;
    for (const auto& st : strag->steps) own_steps += st.index >= job.skipped_warmup_steps;
    holds_back = all > 0 && own * 3 >= all * 2 && n > 0 && own_steps > 0 &&
                 static_cast<double>(own) / static_cast<double>(own_steps) * 10 >=
                     static_cast<double>(steps_ns) / static_cast<double>(n);
  }
  // Either way, the others wait for it: they spend kMinPeersWait more of
  // their step in the collective than it does. Below that its lateness costs
  // little, and chance puts a symmetric job's ranks that far apart: in five
  // of seven runs of two CPU-only DDP ranks on two vCPUs the job's timers had
  // them 0.7 to 3.3 pp apart.
  holds_back = holds_back && peers_wait_more(job, *strag) >= kMinPeersWait;
  if (job.ranks.size() >= 2 && holds_back) {
    v.straggler_rank = strag->rank;
    uint64_t late = 0;
    int n = 0;
    for (const auto& st : strag->steps)
      if (st.index >= job.skipped_warmup_steps) {
        late += st.late_ns;
        ++n;
      }
    v.straggler_late_ns = n ? late / static_cast<uint64_t>(n) : 0;
    // Its own cause: the host-side category in which it spends the most
    // more of its step than the other ranks do (what makes it late); the
    // largest one on that rank when it spends more in none. Its largest
    // cost alone misled: a CPU-only rank computes most of every step, and
    // so does its peer.
    size_t best = static_cast<size_t>(Category::other);
    double best_excess = 0;
    v.straggler_excess = 0;
    for (Category c : {Category::data_loading, Category::dma_submission, Category::host_overhead,
                       Category::cpu_contention}) {
      double others = 0;
      for (const auto& r : job.ranks)
        if (&r != strag) others += share_of(r, c);
      const double excess = share_of(*strag, c) - others / static_cast<double>(job.ranks.size() - 1);
      if (excess > best_excess) {
        best_excess = excess;
        best = static_cast<size_t>(c);
      }
    }
    if (best_excess > 0) {
      v.straggler_excess = best_excess;
    } else {
      for (Category c : {Category::data_loading, Category::dma_submission, Category::host_overhead,
                         Category::cpu_contention})
        if (strag->total[static_cast<size_t>(c)] > strag->total[best]) best = static_cast<size_t>(c);
    }
    v.straggler_cause = static_cast<Category>(best);
  }
  return strag;
}

// The headline and the recommendation for v.category.
void write_headline(const JobAnalysis& job, const PerStep& p, Verdict& v) {
  auto share = [&](Category c) { return 100.0 * job.mean_share[static_cast<size_t>(c)]; };
  auto per = [&](Category c) { return ms(p.ns[static_cast<size_t>(c)]); };
  switch (v.category) {
    case Category::device_execute:
      v.headline = fmt::format("compute-bound: the accelerator is busy {:.0f}% of each {:.1f} ms step; the host keeps up",
                               share(Category::device_execute), ms(p.step_ns));
      break;
    case Category::data_loading:
      v.headline = fmt::format("data loading gates the accelerator: the main thread waits {:.1f} ms per {:.1f} ms step "
                               "({:.0f}%) for batches",
                               per(Category::data_loading), ms(p.step_ns), share(Category::data_loading));
      break;
    case Category::dma_submission:
      v.headline = fmt::format("host-to-device transfers gate the accelerator: {:.1f} ms per {:.1f} ms step ({:.0f}%) "
                               "in DMA submission",
                               per(Category::dma_submission), ms(p.step_ns), share(Category::dma_submission));
      break;
    case Category::collective:
      v.headline = fmt::format("collectives gate the accelerator: {:.1f} ms per {:.1f} ms step ({:.0f}%) waiting on "
                               "the network and other ranks",
                               per(Category::collective), ms(p.step_ns), share(Category::collective));
      break;
    case Category::host_overhead:
      v.headline = fmt::format("host code gates the accelerator: the main thread computes {:.1f} ms per {:.1f} ms step "
                               "({:.0f}%) on the CPU between device calls",
                               per(Category::host_overhead), ms(p.step_ns), share(Category::host_overhead));
      break;
    case Category::cpu_contention:
      v.headline = fmt::format("CPU contention gates the accelerator: the main thread waits {:.1f} ms per {:.1f} ms "
                               "step ({:.0f}%) for a CPU",
                               per(Category::cpu_contention), ms(p.step_ns), share(Category::cpu_contention));
      break;
    default:
      v.headline = fmt::format("unexplained time dominates: {:.0f}% of each step is not attributed",
                               share(Category::other));
  }
  // A CPU-only job (no accelerator anywhere): same categories, but nothing
  // to gate; say what the step's time is, and call host work what it is.
  bool cpu_only = std::all_of(job.ranks.begin(), job.ranks.end(),
                              [](const RankResult& r) { return r.source == StepSource::automatic_host; });
  if (cpu_only) {
    auto replace = [&](std::string_view from, std::string_view to) {
      if (auto at = v.headline.find(from); at != std::string::npos) v.headline.replace(at, from.size(), to);
    };
    replace("gates the accelerator", "dominates the step");
    replace("gate the accelerator", "dominate the step");
    replace(" on the CPU between device calls", " on the CPU (forward, backward, optimizer)");
  }
  v.recommendation = recommendation_for(v.category);
  // The others wait in the collective for one rank: that rank and its own
  // cause come first, and the advice is about it, not the network - where
  // the collective gates the step, or where the rank's lateness costs every
  // other rank a tenth of the step or more whatever gates it (a CPU-only job
  // whose ranks mostly compute, one of them waiting for its batches).
  const bool straggler_first =
      v.straggler_rank >= 0 && (v.category == Category::collective || v.straggler_late_ns * 10 >= p.step_ns);
  if (straggler_first) {
    v.headline = fmt::format("rank {} holds the collective back: it arrives {:.1f} ms late ({} on that rank); ",
                             v.straggler_rank, ms(v.straggler_late_ns), category_name(v.straggler_cause)) +
                 v.headline;
    v.recommendation = straggler_recommendation(v.straggler_rank, v.straggler_cause);
  }
  if (cpu_only) v.headline = "CPU-only job (no accelerator seen): " + v.headline;
  if (cpu_only && v.category == Category::host_overhead && !straggler_first)
    v.recommendation = "profile the training loop on the CPU (forward, backward, optimizer; perf or py-spy): "
                       "with no accelerator, host compute is the step";
}

// Main threads' CPU contention: how much, and who took the CPU.
void contention_evidence(const JobAnalysis& job, const TimelineStore& tl, const PerStep& p, Verdict& v) {
  auto per = [&](Category c) { return ms(p.ns[static_cast<size_t>(c)]); };
  if (p.ns[static_cast<size_t>(Category::cpu_contention)] > 0) {
    std::map<uint32_t, uint64_t> by;
    for (const auto& r : job.ranks)
      if (const auto* t = tl.find(r.main_tid))
        for (const auto& g : t->segs)
          if (g.state == ThreadState::runnable && g.preempted_by) by[g.preempted_by] += g.end - g.start;
    std::vector<std::pair<uint64_t, uint32_t>> top_by;
    for (const auto& [tid, ns] : by) top_by.emplace_back(ns, tid);
    std::sort(top_by.rbegin(), top_by.rend());
    std::string who;
    for (size_t i = 0; i < top_by.size() && i < 3; ++i)
      who += fmt::format("{}tid {} ({:.1f} ms)", i ? ", " : "", top_by[i].second, ms(static_cast<double>(top_by[i].first)));
    v.evidence.push_back(fmt::format("main threads runnable but not running {:.1f} ms/step{}{}",
                                     per(Category::cpu_contention), who.empty() ? "" : "; preempted by ", who));
  }
}

// EFA control path on the hot path, per rank.
void fabric_evidence(const JobAnalysis& job, Verdict& v) {
  // Registrations or queue setup inside counted steps (setup before the
  // first step is expected and not evidence).
  for (const auto& f : job.fabric.ranks) {
    if (!f.counted_steps_with_calls) continue;
    uint64_t calls = 0, ns = 0, reg_bytes = 0;
    for (const auto& r : job.ranks)
      if (r.rank == f.rank)
        for (const auto& st : r.steps)
          if (st.index >= job.skipped_warmup_steps) {
            calls += st.fabric_calls;
            ns += st.fabric_ns;
            reg_bytes += st.fabric_reg_bytes;
          }
    std::string top;
    for (const auto& vb : f.in_steps.verbs) top += fmt::format("{}{} x{}", top.empty() ? "" : ", ", vb.name, vb.calls);
    const double n = f.counted_steps ? f.counted_steps : 1;
    v.evidence.push_back(fmt::format(
        "EFA control path inside steps: rank {} made {} uverbs calls in {} of {} counted steps ({:.2f} ms/step{}; {}); "
        "register buffers and create queues once at start-up (a memory-registration cache that misses costs this "
        "every step)",
        f.rank, calls, f.counted_steps_with_calls, f.counted_steps, ms(static_cast<double>(ns) / n),
        reg_bytes ? fmt::format(", {:.1f} MiB registered/step", static_cast<double>(reg_bytes) / 1048576.0 / n) : "",
        top));
  }
}

}  // namespace

Verdict decide_verdict(const JobAnalysis& job, const TimelineStore& tl, const DropStats& drops) {
  Verdict v;
  v.incomplete = drops.incomplete();
  if (job.ranks.empty()) {
    v.headline = "no training steps found (no process drove an accelerator device or the runtime library)";
    v.recommendation = "check --accel-dev / the runtime library path, or add the steptrace_step() marker";
    return v;
  }
  // Rank the categories by their share of the step.
  std::array<size_t, kCategories> order{};
  for (size_t i = 0; i < kCategories; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return job.mean_share[a] > job.mean_share[b]; });
  size_t top = order[0], second = order[1];
  v.category = static_cast<Category>(top);
  double t = job.mean_share[top], s = job.mean_share[second];
  v.confidence = t + s > 0 ? t / (t + s) : 0;
  if (v.incomplete) v.confidence *= 0.8;

  PerStep p = per_step(job);
  auto per = [&](Category c) { return ms(p.ns[static_cast<size_t>(c)]); };

  const RankResult* strag = find_straggler(job, v);
  write_headline(job, p, v);

  // Evidence: numbers an SRE can check.
  v.evidence.push_back(fmt::format("{} rank(s), steps from {}; mean step {:.1f} ms over {} counted steps",
                                   job.ranks.size(), step_source_name(job.ranks.front().source), ms(p.step_ns),
                                   p.steps));
  v.evidence.push_back(fmt::format("runner-up: {} at {:.0f}% of the step", category_name(static_cast<Category>(second)),
                                   100.0 * s));
  if (p.ns[static_cast<size_t>(Category::data_loading)] > 0) {
    size_t loaders = 0;
    for (const auto& r : job.ranks) loaders += r.loader_pids.empty() ? r.loader_tids.size() : r.loader_pids.size();
    v.evidence.push_back(fmt::format("data loading {:.1f} ms/step: loaders on storage {:.1f} ms, on CPU preprocessing "
                                     "{:.1f} ms ({} loader workers in all ranks)",
                                     per(Category::data_loading), ms(p.storage_ns), ms(p.preprocess_ns), loaders));
  }
  if (p.copies > 0)
    v.evidence.push_back(fmt::format("{:.0f} copy ioctls/step moving {:.2f} MiB/step; DMA submission {:.1f} ms/step "
                                     "({:.2f} GB/s effective)",
                                     p.copies, p.copy_bytes / 1048576.0, per(Category::dma_submission),
                                     p.ns[static_cast<size_t>(Category::dma_submission)] > 0
                                         ? p.copy_bytes / p.ns[static_cast<size_t>(Category::dma_submission)]
                                         : 0.0));
  if (p.ns[static_cast<size_t>(Category::collective)] > 0) {
    // The socket that carried the most bytes in the counted steps, on any
    // thread of a rank: gloo and NCCL move gradients on their own threads,
    // while the main thread's socket is often the rendezvous store's.
    std::map<uint64_t, uint64_t> bytes;
    std::map<uint64_t, int> steps_of;  // the owning rank's counted steps
    for (const auto& r : job.ranks) {
      uint64_t from = UINT64_MAX, to = 0;
      int n = 0;
      for (const auto& st : r.steps)
        if (st.index >= job.skipped_warmup_steps) {
          from = std::min(from, st.start_ns);
          to = std::max(to, st.end_ns);
          ++n;
        }
      if (from >= to) continue;
      for (const auto& [key, t] : tl.threads()) {
        if (t.pid != r.pid) continue;
        for (const auto& sp : t.spans) {
          if (sp.kind != SpanKind::net_send && sp.kind != SpanKind::net_recv) continue;
          if (sp.start < from || sp.start >= to) continue;
          bytes[sp.sock_id] += sp.bytes;
          steps_of[sp.sock_id] = n;
        }
      }
    }
    uint64_t best_id = 0, best_b = 0;
    for (const auto& [id, b] : bytes)
      if (b > best_b) {
        best_b = b;
        best_id = id;
      }
    auto it = tl.sockets().find(best_id);
    v.evidence.push_back(fmt::format("collective {:.1f} ms/step; busiest socket {} carried {:.2f} MiB/step",
                                     per(Category::collective),
                                     it != tl.sockets().end() ? format_tuple(it->second) : std::string("(device-side)"),
                                     static_cast<double>(best_b) / 1048576.0 / std::max(steps_of[best_id], 1)));
  }
  if (v.straggler_rank >= 0)
    v.evidence.push_back(
        v.straggler_excess > 0
            ? fmt::format("rank {} arrived last at the collective in {} steps, {:.1f} ms late on average; it spends "
                          "{:.0f} pp more of its step in {} than the other ranks",
                          v.straggler_rank, strag->straggler_steps, ms(v.straggler_late_ns),
                          100.0 * v.straggler_excess, category_name(v.straggler_cause))
            : fmt::format("rank {} arrived last at the collective in {} steps, {:.1f} ms late on average; its largest "
                          "host-side cost is {}",
                          v.straggler_rank, strag->straggler_steps, ms(v.straggler_late_ns),
                          category_name(v.straggler_cause)));
  contention_evidence(job, tl, p, v);
  fabric_evidence(job, v);
  if (v.incomplete)
    v.evidence.push_back(fmt::format("INCOMPLETE: {}; shares may be off", incomplete_reason(drops)));
  return v;
}

// The device signals' lines (attribution/device_signal_pass.h filled job.signals).
void annotate_verdict_with_signals(JobAnalysis& job) {
  auto& S = job.signals;
  auto& v = job.verdict;
  auto yn = [](const signals::SignalSource& s) { return s.available ? "yes" : "no"; };
  const uint64_t verbs = job.fabric.calls();
  v.evidence.push_back(fmt::format(
      "device signals: NDS {} ({}); EFA {} ({}); neuron sysfs {} ({}); proxy threads {}; EFA control path {}",
      yn(S.nds), S.nds.detail, yn(S.efa), S.efa.detail, yn(S.neuron_sysfs), S.neuron_sysfs.detail, yn(S.proxy),
      verbs ? fmt::format("yes ({} uverbs calls)", verbs) : std::string("no (no uverbs calls seen)")));
  if (S.split_from_nds) {
    v.evidence.push_back(fmt::format(
        "inside each execution (NDS): device compute {:.1f} ms, device collective {:.1f} ms of {:.1f} ms on the "
        "device -> executions are {}-bound",
        S.mean_compute_ms, S.mean_cc_ms, S.mean_device_ms, S.execution_bound));
    if (job.ranks.size() > 0 && (v.category == Category::device_execute || v.category == Category::collective))
      v.headline += fmt::format(" [executions {}-bound per NDS: compute {:.1f} ms, collective {:.1f} ms]",
                                S.execution_bound, S.mean_compute_ms, S.mean_cc_ms);
  } else if (!job.ranks.empty()) {
    v.evidence.push_back("device compute vs device collective: NDS unavailable, estimated from cross-rank arrival skew");
  }
  if (S.efa.available) {
    v.evidence.push_back(fmt::format(
        "EFA: {:.1f} MiB/step on the rank's adapter; collective achieves {:.2f} Gbit/s of a {:.1f} Gbit/s link "
        "(ratio {:.2f}) -> {}",
        S.efa_mib_per_step, S.achieved_gbit, S.link_gbit, S.net_ratio,
        S.network_bound ? "network-bound collective" : "not network-bound"));
    if (S.network_bound && v.category == Category::collective) v.headline += "; the collective is network-bound";
  }
  if (S.proxy.available) {
    std::string names;
    for (size_t i = 0; i < S.proxies.size() && i < 4; ++i)
      names += fmt::format("{}{}/{} ({})", i ? ", " : "", S.proxies[i].comm, S.proxies[i].tid, S.proxies[i].how);
    std::string by = S.proxy_top_preemptor[0] ? fmt::format(", most by {}", S.proxy_top_preemptor) : "";
    v.evidence.push_back(fmt::format(
        "network proxy threads {}: run-queue delay {:.2f} ms/step {} ({:.0f}% of it), preempted "
        "{:.1f} times/step{}{}",
        names, S.proxy_runq_ms_per_step, S.proxy_share_of, 100 * S.proxy_runq_share_of_collective,
        S.proxy_preempted_per_step, by,
        S.proxy_runq_share_of_collective >= 0.1 ? " -> the collective waits on a CPU for its proxy: pin or isolate "
                                                  "the proxy threads' CPUs"
                                                : ""));
  }
  if (!S.sysfs_deltas.empty()) {
    std::string s;
    for (size_t i = 0; i < S.sysfs_deltas.size() && i < 6; ++i)
      s += fmt::format("{}{} +{}", i ? ", " : "", S.sysfs_deltas[i].first, S.sysfs_deltas[i].second);
    v.evidence.push_back(fmt::format("neuron sysfs in the window: {}", s));
  }
  for (const auto& e : S.evidence) v.evidence.push_back(e);
}

}  // namespace steptrace
