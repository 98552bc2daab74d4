// SPDX-License-Identifier: Apache-2.0
// accuracy-matrix: runs trainsim scenarios under steptrace and prints, per
// scenario, the verdict vs the truth, step count, step duration error and
// per-category share error. `--markdown` prints the table for docs/accuracy.md.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "accuracy.h"
#include "truth.h"

using namespace steptrace::accuracy;

int main(int argc, char** argv) {
  CLI::App app{"accuracy-matrix: steptrace vs trainsim ground truth"};
  std::vector<std::string> scenarios = trainsim::truth::categories().empty()
                                           ? std::vector<std::string>{}
                                           : std::vector<std::string>{"compute-bound", "data-bound", "dma-bound",
                                                                      "collective-bound", "straggler", "host-bound",
                                                                      "contention"};
  std::vector<int> ranks_list{2};
  std::vector<int> loaders_list{0};
  std::string trainsim;
  bool markdown = false;
  double attach_after = 0;
  double duration = 0;
  int dump_step = -1;
  bool per_step = false;
  size_t dump_rank = 0;
  double dump_bad = 0;
  app.add_option("--dump-bad", dump_bad, "With --per-step: dump every step whose first category is off by more than this many pp");
  app.add_option("--dump-rank", dump_rank, "The rank --dump-step prints");
  app.add_flag("--per-step", per_step, "Print each step's truth and traced shares (every rank)");
  app.add_option("--dump-step", dump_step, "Print truth phases and the traced main-thread timeline of this step (rank 0)");
  app.add_option("--scenario", scenarios, "Scenarios to run");
  app.add_option("--ranks", ranks_list, "Rank counts to run each scenario with");
  app.add_option("--loaders", loaders_list, "Loader worker counts (0: the scenario's default)");
  app.add_option("--trainsim", trainsim, "Path to the trainsim binary")->required();
  app.add_flag("--markdown", markdown, "Print a Markdown table");
  app.add_option("--attach-after", attach_after,
                 "Start each job on its own and attach -p to it this many seconds later (0: run it under steptrace)");
  app.add_option("--duration", duration, "trainsim --duration for each job (0: the scenario's own)");
  bool no_datastore = false;
  app.add_flag("--no-datastore", no_datastore,
               "Leave the simulated devices' datastore (NDS) unread: the kernel-only estimates of an old driver");
  CLI11_PARSE(app, argc, argv);

  if (markdown) {
    fmt::print("| scenario | ranks | loaders | truth gating | verdict | steps (truth/tracer) | step dur err % | "
               "mean share err pp | worst category err pp | straggler (truth/tracer) |\n");
    fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  }
  int failures = 0;
  for (const auto& sc : scenarios) {
    for (int nr : ranks_list) {
      for (int nl : loaders_list) {
        ScenarioRun run;
        run.scenario = sc;
        run.trainsim = trainsim;
        run.extra_args = {"--ranks", std::to_string(nr)};
        run.attach_after_s = attach_after;
        run.datastore = !no_datastore;
        if (duration > 0) run.extra_args.insert(run.extra_args.end(), {"--duration", fmt::format("{}", duration)});
        if (nl > 0) run.extra_args.insert(run.extra_args.end(), {"--loader-workers", std::to_string(nl)});
        ScenarioResult res;
        std::string err;
        if (!run_scenario(run, &res, &err)) {
          fmt::print(stderr, "{} ranks={} loaders={}: FAILED: {}\n", sc, nr, nl, err);
          ++failures;
          continue;
        }
        auto dump = [&](size_t dump_rank, int dump_step) {
        if (dump_rank < res.truth.rank_data.size() && !res.report.job.ranks.empty()) {
          const auto& tr = res.truth.rank_data[dump_rank];
          const auto* tstep = dump_step < static_cast<int>(tr.steps.size()) ? &tr.steps[static_cast<size_t>(dump_step)] : nullptr;
          if (tstep) {
            int64_t base = tstep->start_ns;
            fmt::print("truth step {} [{:.3f}, {:.3f}] ms\n", dump_step, 0.0, (tstep->end_ns - base) / 1e6);
            for (const auto& ph : tstep->phases)
              fmt::print("  {:<16} {:<15} {:8.3f} {:8.3f} run_delay {:6.3f} busy {}\n", ph.name, ph.category,
                         (ph.start_ns - base) / 1e6, (ph.end_ns - base) / 1e6, ph.run_delay_ns / 1e6, ph.busy_wait);
            uint32_t tid = static_cast<uint32_t>(tr.main_tid);
            if (const auto* tl = res.report.analysis.timeline.find(tid)) {
              for (const auto& g : tl->segs)
                if (static_cast<int64_t>(g.end) > tstep->start_ns && static_cast<int64_t>(g.start) < tstep->end_ns)
                  fmt::print("  seg {:<10} {:8.3f} {:8.3f} waker {} sys {}\n", steptrace::state_name(g.state),
                             (static_cast<int64_t>(g.start) - base) / 1e6, (static_cast<int64_t>(g.end) - base) / 1e6,
                             g.waker_tid, g.blocked_sys);
              for (const auto& sp : tl->spans)
                if (static_cast<int64_t>(sp.end) > tstep->start_ns && static_cast<int64_t>(sp.start) < tstep->end_ns)
                  fmt::print("  span kind {} cmd {:x} {:8.3f} {:8.3f}\n", static_cast<int>(sp.kind), sp.cmd,
                             (static_cast<int64_t>(sp.start) - base) / 1e6, (static_cast<int64_t>(sp.end) - base) / 1e6);
            }
            for (const auto& rr : res.report.job.ranks)
              if (static_cast<int>(rr.pid) == tr.pid)
            for (const auto& st : rr.steps)
              if (st.index == dump_step) {
                fmt::print("  tracer step [{:.3f}, {:.3f}]:", (static_cast<int64_t>(st.start_ns) - base) / 1e6,
                           (static_cast<int64_t>(st.end_ns) - base) / 1e6);
                for (size_t c = 0; c < steptrace::kCategories; ++c)
                  fmt::print(" {}={:.2f}", steptrace::kCategoryNames[c], st.ns[c] / 1e6);
                fmt::print("\n");
              }
          }
        }
        };
        if (dump_step >= 0) dump(dump_rank, dump_step);
        if (per_step) {
          for (const auto& tr : res.truth.rank_data) {
            const steptrace::RankResult* rr = nullptr;
            for (const auto& x : res.report.job.ranks)
              if (static_cast<int>(x.pid) == tr.pid) rr = &x;
            if (!rr) continue;
            for (const auto& s : tr.steps) {
              const steptrace::StepResult* best = nullptr;
              int64_t best_ov = 0;
              for (const auto& st : rr->steps) {
                int64_t ov = std::min<int64_t>(static_cast<int64_t>(st.end_ns), s.end_ns) -
                             std::max<int64_t>(static_cast<int64_t>(st.start_ns), s.start_ns);
                if (ov > best_ov) best_ov = ov, best = &st;
              }
              if (!best) continue;
              auto ts = trainsim::truth::shares(s);
              double tdur = static_cast<double>(best->end_ns - best->start_ns);
              fmt::print("  rank {} step {:2} {:7.2f}/{:7.2f} ms", tr.rank, s.index, s.duration_ns() / 1e6, tdur / 1e6);
              for (size_t k = 0; k < steptrace::kCategories; ++k) {
                double v = tdur > 0 ? static_cast<double>(best->ns[k]) / tdur : 0;
                double t = ts[std::string(steptrace::kCategoryNames[k])];
                if (std::fabs(v - t) > 0.03)
                  fmt::print("  {} {:.1f}/{:.1f}", steptrace::kCategoryNames[k], 100 * t, 100 * v);
              }
              fmt::print("\n");
              if (dump_bad > 0 && std::fabs(static_cast<double>(best->ns[0]) / tdur -
                                            ts[std::string(steptrace::kCategoryNames[0])]) * 100 > dump_bad)
                dump(static_cast<size_t>(tr.rank), s.index);
            }
          }
        }
        double mean_err = 0;
        for (const auto& [c, v] : res.cmp.share_error_pp) mean_err += v;
        mean_err /= static_cast<double>(std::max<size_t>(1, res.cmp.share_error_pp.size()));
        std::string worst;
        double wv = -1;
        for (const auto& [c, v] : res.cmp.share_error_pp)
          if (v > wv) {
            wv = v;
            worst = c;
          }
        std::string strag = fmt::format("{}/{}", res.truth_straggler, res.tracer_straggler_pid_rank);
        if (markdown) {
          fmt::print("| {} | {} | {} | {} | {} | {}/{} | {:.2f} | {:.2f} | {} {:.2f} | {} |\n", sc, nr,
                     nl ? std::to_string(nl) : "default", res.truth_gating, res.tracer_verdict, res.cmp.truth_steps,
                     res.cmp.tracer_steps, res.cmp.mean_step_duration_error_pct, mean_err, worst, wv, strag);
        } else {
          fmt::print("{:<17} ranks={} loaders={:<7} truth={:<15} verdict={:<15} steps {}/{} dur_err {:.2f}% "
                     "worst {} {:.2f}pp straggler {}\n",
                     sc, nr, nl ? std::to_string(nl) : "default", res.truth_gating, res.tracer_verdict,
                     res.cmp.truth_steps, res.cmp.tracer_steps, res.cmp.mean_step_duration_error_pct, worst, wv,
                     strag);
          std::vector<const trainsim::truth::Step*> steps;
          for (const auto& r : res.truth.rank_data)
            for (size_t i = 1; i < r.steps.size(); ++i) steps.push_back(&r.steps[i]);
          auto ts = trainsim::truth::mean_shares(steps);
          for (const auto& [c, v] : res.cmp.share_error_pp) {
            double tracer = 0;
            for (size_t k = 0; k < steptrace::kCategories; ++k)
              if (steptrace::kCategoryNames[k] == c) tracer = res.report.job.mean_share[k];
            fmt::print("    {:<16} truth {:5.1f}%  steptrace {:5.1f}%  err {:6.2f} pp\n", c, 100 * ts[c], 100 * tracer, v);
          }
        }
      }
    }
  }
  return failures ? 1 : 0;
}
