// SPDX-License-Identifier: Apache-2.0
// accuracy-matrix: runs trainsim scenarios under steptrace and prints, per
// scenario, the verdict vs the truth, step count, step duration error and
// per-category share error. `--markdown` prints the table for docs/accuracy.md.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

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
  app.add_option("--scenario", scenarios, "Scenarios to run");
  app.add_option("--ranks", ranks_list, "Rank counts to run each scenario with");
  app.add_option("--loaders", loaders_list, "Loader worker counts (0: the scenario's default)");
  app.add_option("--trainsim", trainsim, "Path to the trainsim binary")->required();
  app.add_flag("--markdown", markdown, "Print a Markdown table");
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
        if (nl > 0) run.extra_args.insert(run.extra_args.end(), {"--loader-workers", std::to_string(nl)});
        ScenarioResult res;
        std::string err;
        if (!run_scenario(run, &res, &err)) {
          fmt::print(stderr, "{} ranks={} loaders={}: FAILED: {}\n", sc, nr, nl, err);
          ++failures;
          continue;
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
          for (const auto& [c, v] : res.cmp.share_error_pp) fmt::print("    {:<16} {:6.2f} pp\n", c, v);
        }
      }
    }
  }
  return failures ? 1 : 0;
}
