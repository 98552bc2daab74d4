// SPDX-License-Identifier: Apache-2.0
#include "export/text_report.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attribution/host_steals.h"
#include "export/profile_view.h"
#include "export/provenance.h"
#include "export/report_stats.h"
#include "export/what_if_view.h"
#include "util/text.h"

namespace steptrace {
namespace {

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

struct Painter {
  bool on;
  std::string operator()(const std::string& s, const char* code) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
  }
};

// Cut a plain line to the report width (tables whose last column is free text).
std::string fit(std::string s) {
  if (s.size() > kReportColumns) s = std::string(utf8_prefix(s, kReportColumns));
  return s;
}

// Word-wrap `text` to the report width; continuation lines get `indent`.
std::string wrap(const std::string& first_prefix, const std::string& text, const std::string& indent) {
  std::string out, line = first_prefix;
  size_t line_len = first_prefix.size();
  bool fresh = true;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    std::string word = text.substr(i, j - i);
    i = j + 1;
    if (word.empty()) continue;
    if (!fresh && line_len + 1 + word.size() > kReportColumns) {
      out += line + "\n";
      line = indent;
      line_len = indent.size();
      fresh = true;
    }
    if (word.size() > kReportColumns - line_len) word = std::string(utf8_prefix(word, kReportColumns - line_len));
    if (!fresh) {
      line += " ";
      ++line_len;
    }
    line += word;
    line_len += word.size();
    fresh = false;
  }
  out += line + "\n";
  return out;
}

void steps_table(std::string& o, const JobAnalysis& job, const RankResult& rk, const Painter& paint,
                 bool all_steps) {
  o += paint(fmt::format("Steps of rank {} (ms, steps from {})", rk.rank, step_source_name(rk.source)), "1") + "\n";
  o += fmt::format("{:>5} {:>8}", "STEP", "DUR");
  for (size_t c = 0; c < kCategories; ++c) o += fmt::format(" {:>7}", category_label(c));
  o += "  GATING\n";
  const size_t n = rk.steps.size();
  if (rk.steps_total > n)
    o += fmt::format("{:>5}  (the last {} of {} steps, kept in detail; the totals cover all)\n", "", n,
                     rk.steps_total);
  const bool elide = !all_steps && n > 24;
  for (size_t i = 0; i < n; ++i) {
    if (elide && i >= 10 && i + 10 < n) {
      if (i == 10) o += fmt::format("{:>5}  ({} more steps; -v shows all)\n", "...", n - 20);
      continue;
    }
    const auto& st = rk.steps[i];
    std::string line = fmt::format("{:>5} {:>8.2f}", st.index, ms(st.duration()));
    for (size_t c = 0; c < kCategories; ++c) line += fmt::format(" {:>7.2f}", ms(st.ns[c]));
    line += fmt::format("  {}", category_name(st.gating));
    if (st.index < job.skipped_warmup_steps) line += " (warm-up)";
    o += fit(line) + "\n";
  }
}

}  // namespace

// The EFA control path as setup events: one line per rank and phase.
void efa_control_section(std::string& o, const JobAnalysis& job, const Painter& paint) {
  if (job.fabric.ranks.empty()) return;
  o += "\n" + paint("EFA control path (uverbs calls: setup events)", "1") + "\n";
  auto line = [&](const RankFabric& f, const char* when, const FabricPhase& p, const std::string& tail) {
    if (!p.calls) return;
    std::string verbs;
    for (const auto& v : p.verbs) {
      verbs += fmt::format("{}{} x{}", verbs.empty() ? "" : ", ", v.name, v.calls);
      if (v.bytes) verbs += fmt::format(" ({:.1f} MiB)", static_cast<double>(v.bytes) / 1048576.0);
      if (v.errors) verbs += fmt::format(" [{} failed]", v.errors);
    }
    std::string who = f.rank >= 0 ? fmt::format("rank {}", f.rank) : fmt::format("pid {}", f.pid);
    o += wrap(fmt::format("  {} {:<9} {:>4} calls {:>9.2f} ms  ", who, when, p.calls, ms(p.total_ns)),
              verbs + tail, "      ");
  };
  for (const auto& f : job.fabric.ranks) {
    line(f, "setup", f.setup, "");
    line(f, "in steps", f.in_steps,
         fmt::format(" - in {} of {} counted steps", f.counted_steps_with_calls, f.counted_steps));
    line(f, "teardown", f.teardown, "");
  }
}

bool want_color(bool no_color_flag, int fd) {
  if (no_color_flag) return false;
  const char* nc = std::getenv("NO_COLOR");
  if (nc && *nc) return false;
  const char* term = std::getenv("TERM");
  if (term && std::strcmp(term, "dumb") == 0) return false;
  return ::isatty(fd) == 1;
}

namespace {

// 1. The verdict, one line, and what makes it INCOMPLETE.
void verdict_section(std::string& o, const SessionReport& r, const Painter& paint) {
  const auto& job = r.job;
  const auto& v = job.verdict;
  // The headline is one sentence; it wraps (indented) rather than being cut.
  std::string head = v.headline.empty() ? "no verdict" : v.headline;
  if (r.incomplete() || v.incomplete) head += " [INCOMPLETE]";
  std::string wrapped = wrap("VERDICT: ", head, "         ");
  if (!wrapped.empty() && wrapped.back() == '\n') wrapped.pop_back();
  o += paint(wrapped, job.ranks.empty() ? "1" : "1;33") + "\n";
  if (!job.ranks.empty() && !v.recommendation.empty())
    o += wrap(fmt::format("  confidence {:.0f}% -> ", 100 * v.confidence), v.recommendation, "     ");
  if (r.drops.incomplete()) {
    std::string why = wrap("  INCOMPLETE: ", incomplete_reason(r.drops) + "; shares may be off", "    ");
    if (!why.empty() && why.back() == '\n') why.pop_back();
    o += paint(why, "1;31") + "\n";
  }
  if (!r.capture_end.empty())
    o += paint(fit(fmt::format("  INCOMPLETE: the capture ended early ({})", r.capture_end)), "1;31") + "\n";
  for (const auto& h : r.hangs) {
    std::string head = wrap("  ", h.headline(), "    ");
    if (!head.empty() && head.back() == '\n') head.pop_back();
    o += paint(head, "1;31") + "\n";
    o += fmt::format("    found {:.1f} s after the last step end; {}\n", static_cast<double>(h.detected_ns - h.since_ns) / 1e9,
                     h.ended_ns ? fmt::format("steps went on {:.1f} s later", static_cast<double>(h.ended_ns - h.detected_ns) / 1e9)
                                : std::string("still hung when tracing ended"));
    for (const auto& line : h.lines()) o += wrap("    - ", line, "      ");
  }
}

// Where the step time changed level, with the wall-clock time when known.
void changes_section(std::string& o, const SessionReport& r, const Painter& paint) {
  if (r.job.changes.empty()) return;
  o += "\n" + paint("Changes in step time", "1") + "\n";
  for (const auto& c : r.job.changes) {
    const std::string when = wall_clock_text(r.source, c.at_ns);
    o += wrap("  - ", describe_change(c) + (when.empty() ? "" : " at " + when), "    ");
  }
}

// What the host took from the steps, per rank, when anything: the named
// causes first, then each rank's means per step.
void host_steals_section(std::string& o, const SessionReport& r, const Painter& paint) {
  const auto& hs = r.job.host_steals;
  // Timer ticks take a few microseconds from every slice: shown from half a
  // percent of the step.
  bool any = !hs.findings.empty();
  for (const auto& s : hs.ranks)
    any = any || s.throttled_wait_ns + s.data_throttled_ns + s.loader_reclaim_ns + s.reclaim_ns + s.irq_ns + s.softirq_ns >=
                     0.005 * s.step_ns;
  if (!any) return;
  o += "\n" + paint("What the host took from the steps", "1") + "\n";
  for (const auto& f : hs.findings) o += wrap("  - ", f.text + ": " + f.recommendation, "    ");
  // Throttled: what lengthened the step (of cpu_contention), then all the
  // quota waits; loaders' reclaim: all of it, then what the main thread waited.
  o += "  rank   step ms  throttled   (all)  loaders throttled  loaders reclaim  (waited)  reclaim    irq  softirq "
       "(ms/step)\n";
  for (const auto& s : hs.ranks)
    o += fmt::format("  {:>4}  {:>8.1f}  {:>9.2f}  {:>6.2f}  {:>17.2f}  {:>15.2f}  {:>8.2f}  {:>7.2f}  {:>5.2f}  {:>7.2f}{}\n",
                     s.rank, s.step_ns / 1e6, s.throttled_ns / 1e6, s.throttled_wait_ns / 1e6,
                     s.data_throttled_ns / 1e6, s.loader_reclaim_ns / 1e6, s.data_reclaim_ns / 1e6,
                     s.reclaim_ns / 1e6, s.irq_ns / 1e6, s.softirq_ns / 1e6,
                     s.softirq_vecs ? "  " + softirq_vec_names(s.softirq_vecs) : std::string());
}

// 2-5. Steps, percentiles, evidence, ranks (when there are ranks).
// Who each rank is (container, pod, the launcher's rank) and where its steps came from, and why.
void sources_section(std::string& o, const SessionReport& r, const Painter& paint) {
  o += "\n" + paint("Where the ranks run and where their steps come from", "1") + "\n";
  for (const auto& rk : r.job.ranks) {
    std::string who = fmt::format("rank {} (pid {}, {})", rk.rank, rk.pid, rk.comm.empty() ? "?" : rk.comm);
    if (const ProcIdentity* id = identity_of(r.analysis, rk.pid)) {
      if (auto d = id->describe(); !d.empty()) who += ": " + d;
      if (auto it = id->env.find("RANK"); it != id->env.end()) who += ", RANK=" + it->second;
    }
    o += wrap("  ", who, "    ");
    o += wrap("    steps from ", fmt::format("{}: {}", step_source_name(rk.source), step_source_reason(rk, r.analysis.notes)),
              "      ");
  }
}

void ranks_sections(std::string& o, const SessionReport& r, const TextStyle& style, const Painter& paint) {
  const auto& job = r.job;
  const auto& v = job.verdict;
  if (!job.ranks.empty()) {
    // 2. Per-step table (first rank; every rank with -v).
    o += "\n";
    if (style.verbose > 0) {
      for (size_t i = 0; i < job.ranks.size(); ++i) {
        if (i) o += "\n";
        steps_table(o, job, job.ranks[i], paint, true);
      }
    } else {
      steps_table(o, job, job.ranks.front(), paint, false);
      if (job.ranks.size() > 1) o += fmt::format("  (-v shows the steps of all {} ranks)\n", job.ranks.size());
    }

    // 3. Percentiles.
    auto ss = step_stats(job);
    o += "\n" +
         paint(fmt::format("Percentiles over {} counted steps of all ranks (ms{})", ss.counted,
                           ss.approximate ? "; steps no longer in detail from a histogram, within 1 %" : ""),
               "1") +
         "\n";
    o += fmt::format("{:<16} {:>9} {:>9} {:>9} {:>9}\n", "CATEGORY", "p50", "p90", "p99", "max");
    auto row = [&](std::string_view name, const Percentiles& p) {
      o += fmt::format("{:<16} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}\n", name, ms(p.p50), ms(p.p90), ms(p.p99),
                       ms(p.max));
    };
    row("step", ss.step);
    for (size_t c = 0; c < kCategories; ++c) row(kCategoryNames[c], ss.category[c]);

    // 4. Evidence.
    o += "\n" + paint("Evidence", "1") + "\n";
    if (v.evidence.empty()) o += "  (none)\n";
    for (const auto& e : v.evidence) o += wrap("  - ", e, "    ");
    changes_section(o, r, paint);
    host_steals_section(o, r, paint);
    o += profile_text(r, named_stacks(r));

    // 4b. What if: the fixes ranked by the step time they would save.
    if (const WhatIfText w = what_if_text(job.what_if); !w.title.empty()) {
      o += "\n" + paint(fit(w.title), "1") + "\n";
      for (const auto& line : w.lines) o += wrap("  ", line, "      ");
    }

    // 5. Ranks, straggler marked.
    o += "\n" + paint("Ranks (share of each counted step)", "1") + "\n";
    o += fmt::format("{:>4} {:>7} {:>5} {:>8}", "RANK", "PID", "STEPS", "MEAN ms");
    for (size_t c = 0; c < kCategories; ++c) o += fmt::format(" {:>7}", category_label(c));
    o += "\n";
    for (const auto& rk : job.ranks) {
      const uint64_t n = counted_steps(job, rk);
      auto sh = rank_shares(rk);
      std::string line = fmt::format("{:>4} {:>7} {:>5} {:>8.1f}", rk.rank, rk.pid, rk.steps_total,
                                     n ? ms(rk.counted_ns) / n : 0.0);
      for (size_t c = 0; c < kCategories; ++c) line += fmt::format(" {:>6.1f}%", 100 * sh[c]);
      if (rk.rank == v.straggler_rank) {
        line += "  <- straggler";
        o += paint(line, "1;31") + "\n";
      } else {
        o += line + "\n";
      }
    }
    if (v.straggler_rank >= 0)
      o += wrap("  ", fmt::format("rank {} arrived last at the collective, {} late on average (cause: {})",
                                  v.straggler_rank, human_ns(v.straggler_late_ns), category_name(v.straggler_cause)),
                "  ");
    sources_section(o, r, paint);
  }
}

// Detail tables with -v (threads, ioctls, block I/O, sockets, tiers); one summary line without.
void detail_tables(std::string& o, const SessionReport& r, const TextStyle& style, const Painter& paint) {
  const auto& c = r.analysis.collectors;
  if (style.verbose > 0) {
    o += "\n" + paint("Threads (ms)", "1") + "\n";
    o += fmt::format("{:>7} {:>7} {:<15} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}  {}\n", "PID", "TID", "COMM", "ON-CPU",
                     "RUNNABLE", "SLEEP", "D-WAIT", "PREEMPT", "YIELDS", "TOP WAKER");
    for (const auto* t : sorted_threads(r)) {
      std::string waker;
      uint64_t best = 0;
      for (const auto& [wtid, w] : t->wakers)
        if (w.count > best) {
          best = w.count;
          waker = fmt::format("{}/{} x{}", w.waker_comm, wtid, w.count);
        }
      o += fit(fmt::format("{:>7} {:>7} {:<15} {:>8.1f} {:>8.1f} {:>8.1f} {:>8.1f} {:>7} {:>6}  {}", t->pid, t->tid,
                           utf8_prefix(t->comm, 15), ms(t->ns(ThreadState::running)), ms(t->ns(ThreadState::runnable)),
                           ms(t->ns(ThreadState::sleeping)), ms(t->ns(ThreadState::disk_wait)), t->preempted,
                           t->yields, waker)) +
           "\n";
    }
    if (!c.accel_by_cmd.empty()) {
      o += "\n" + paint("Accelerator ioctls", "1") + "\n";
      o += fmt::format("{:<28} {:>8} {:>10} {:>10} {:>12}\n", "COMMAND", "COUNT", "TOTAL ms", "MAX ms", "BYTES");
      for (const auto& [cmd, s] : c.accel_by_cmd)
        o += fit(fmt::format("{:<28} {:>8} {:>10.2f} {:>10.2f} {:>12}", neuron_cmd_name(cmd), s.agg.count,
                             ms(s.agg.total_ns), ms(s.agg.max_ns), s.agg.bytes)) +
             "\n";
    }
    if (!c.block.empty()) {
      o += "\n" + paint("Block I/O (issue -> complete)", "1") + "\n";
      o += fmt::format("{:<8} {:>7} {:<5} {:>8} {:>12} {:>9} {:>9}\n", "DEV", "TID", "OP", "COUNT", "BYTES",
                       "AVG ms", "MAX ms");
      for (const auto& [k, a] : c.block)
        o += fmt::format("{:<8} {:>7} {:<5} {:>8} {:>12} {:>9.3f} {:>9.3f}\n", format_dev(k.dev), k.tid,
                         k.write ? "write" : "read", a.count, a.bytes, a.count ? ms(a.total_ns) / a.count : 0.0,
                         ms(a.max_ns));
    }
    if (!c.socks.empty()) {
      o += "\n" + paint("TCP sockets", "1") + "\n";
      o += fmt::format("{:<44} {:>12} {:>12} {:>10} {:>6}\n", "SOCKET", "SENT", "RECEIVED", "RECV ms", "RETX");
      for (const auto& [id, s] : c.socks)
        o += fit(fmt::format("{:<44} {:>12} {:>12} {:>10.2f} {:>6}", format_tuple(s.tuple), s.send.bytes,
                             s.recv.bytes, ms(s.recv.total_ns), s.retransmits)) +
             "\n";
    }
    if (!r.tiers.empty()) {
      o += "\n" + paint("Attach tiers", "1") + "\n";
      for (const auto& t : r.tiers) o += fit(fmt::format("  {:<8} {}", t.collector, t.tier)) + "\n";
    }
  } else {
    o += fit(fmt::format("\n{} threads, {} ioctl commands, {} block streams, {} sockets (-v for the tables)",
                         r.analysis.threads.threads().size(), c.accel_by_cmd.size(), c.block.size(),
                         c.socks.size())) +
         "\n";
  }

}

// How a long session stayed bounded: windows folded, steps out of detail, the cap.
void memory_line(std::string& o, const SessionReport& r) {
  const WindowStats& w = r.windows;
  if (!w.folds && !w.memory_cap_hits) return;
  std::string line = w.fold_every_ns
                         ? fmt::format("analysed in windows of {:g} s ({} folded)",
                                       static_cast<double>(w.fold_every_ns) / 1e9, w.folds)
                         : fmt::format("folded {} times at the memory cap", w.folds);
  if (w.steps_out_of_detail)
    line += fmt::format("; {} older steps counted in the totals but not kept in detail", w.steps_out_of_detail);
  if (const uint64_t t = r.analysis.threads.folded_threads())
    line += fmt::format("; {} exited threads summed, not listed", t);
  if (const uint64_t n = r.analysis.collectors.folded_sock_count)
    line += fmt::format("; {} closed sockets summed ({:.1f} MiB), not listed", n,
                        static_cast<double>(r.analysis.collectors.folded_socks.send.bytes +
                                            r.analysis.collectors.folded_socks.recv.bytes) /
                            1048576.0);
  if (w.max_memory_bytes)
    line += fmt::format("; peak {:.1f} MiB of the {:.0f} MiB cap", static_cast<double>(w.peak_memory_bytes) / 1048576.0,
                        static_cast<double>(w.max_memory_bytes) / 1048576.0);
  if (w.memory_cap_hits) line += fmt::format("; the cap brought {} folds forward", w.memory_cap_hits);
  if (w.memory_cap_forgets)
    line += fmt::format("; {} windows forgotten whole at the cap (their open steps are lost)", w.memory_cap_forgets);
  o += wrap("  memory: ", line, "    ");
}

// 6. Footer: events, drops per class, the tracer's own cost.
void footer_section(std::string& o, const SessionReport& r, const Painter& paint) {
  o += "\n" + paint("Events and overhead", "1") + "\n";
  uint64_t lost = 0;
  for (uint64_t n : r.drops.losses) lost += n;
  std::string footer = fmt::format("steptrace: {:.2f} s traced, {} records, {} dropped, {} lost in the kernel{}",
                                   r.wall_s, r.records, r.drops.total_dropped(), lost,
                                   r.incomplete() ? " (INCOMPLETE)" : "");
  o += paint(fit(footer), r.incomplete() ? "31" : "0") + "\n";
  std::string kinds;
  for (int k = 1; k < ST_EV_KIND_MAX; ++k) {
    if (r.drops.emitted[k] == 0 && r.drops.dropped[k] == 0) continue;
    kinds += fmt::format("{}{} {}/{}", kinds.empty() ? "" : ", ", kind_name(static_cast<uint32_t>(k)),
                         r.drops.emitted[k], r.drops.dropped[k]);
  }
  if (!kinds.empty()) o += wrap("  emitted/dropped: ", kinds, "    ");
  // Losses next to the drops: every kind that happened, and any that could not be measured.
  std::string losses;
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) {
    std::string item;
    if (k == ST_LOSS_KRETPROBE_MISSED && r.drops.kretprobe == LossMeasure::not_measurable)
      item = fmt::format("{} not measurable (kernel < 6.7)", loss_name(k));
    else if (r.drops.losses[k])
      item = fmt::format("{} {} ({})", loss_name(k), r.drops.losses[k], loss_text(k));
    if (!item.empty()) losses += (losses.empty() ? "" : "; ") + item;
  }
  if (!losses.empty()) o += wrap("  lost: ", losses, "    ");
  if (r.decode.unknown_kind || r.decode.bad_size)
    o += fmt::format("  undecodable: {} unknown kind, {} bad size\n", r.decode.unknown_kind, r.decode.bad_size);
  o += fit(fmt::format("  tracer CPU {:.3f} s ({:.2f}% of one core), ring {} MiB drained every {} ms",
                       r.tracer_cpu_s, r.wall_s > 0 ? 100.0 * r.tracer_cpu_s / r.wall_s : 0.0, r.ring_mib,
                       r.drain_ms)) +
       "\n";
  memory_line(o, r);
  {
    const auto& src = r.source;
    auto t0 = wall_clock_text(src, r.window_start_ns);
    o += wrap("  source: ",
              fmt::format("host {}, kernel {}, steptrace {}{}", src.host.empty() ? "?" : src.host,
                          src.kernel.empty() ? "?" : src.kernel, src.recorded_by.empty() ? "?" : src.recorded_by,
                          t0.empty() ? "" : ", t0 " + t0 + " (wall clock)"),
              "    ");
    // Only a capture with clock anchors (an older one's report is unchanged).
    if (auto clock = clock_line(r.analysis.clock); !clock.empty()) o += wrap("  ", clock, "    ");
  }
  if (!r.end_reason.empty() || !r.job_outcome.empty())
    o += fit(fmt::format("  tracing ended: {}{}", r.end_reason.empty() ? "ended" : r.end_reason,
                         r.job_outcome.empty() ? "" : "; the job " + r.job_outcome)) +
         "\n";
  for (const auto& w : r.warnings) o += wrap("warning: ", host_string(w), "  ");
}

}  // namespace

std::string format_report_text(const SessionReport& r, const TextStyle& style) {
  const Painter paint{style.color};
  std::string o;
  verdict_section(o, r, paint);
  ranks_sections(o, r, style, paint);
  efa_control_section(o, r.job, paint);
  detail_tables(o, r, style, paint);
  footer_section(o, r, paint);
  return o;
}

}  // namespace steptrace
