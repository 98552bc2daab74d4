// SPDX-License-Identifier: Apache-2.0
// bench-replay: replay a capture through the pipeline (decode -> reorder ->
// timelines -> steps -> attribution -> verdict) N times and report the time
// per replay. Links steptrace_analysis alone: the analysis side building
// without libbpf is checked by this link.
//
//   bench-replay FILE [N]      -> one JSON object on stdout
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/replay.h"

using namespace steptrace;

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: bench-replay FILE [N]\n");
    return 2;
  }
  const int n = argc == 3 ? std::atoi(argv[2]) : 5;
  if (n < 1) {
    std::fprintf(stderr, "bench-replay: N must be at least 1\n");
    return 2;
  }
  double best = 1e30, total = 0;
  uint64_t records = 0;
  size_t steps = 0;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = replay_capture(argv[1]);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r) {
      std::fprintf(stderr, "bench-replay: %s\n", r.error().message.c_str());
      return 1;
    }
    records = r->records;
    steps = 0;
    for (const auto& rank : r->job.ranks) steps += rank.steps.size();
    best = std::min(best, s);
    total += s;
  }
  nlohmann::json out = {{"file", argv[1]}, {"replays", n}, {"records", records}, {"steps", steps},
                        {"best_s", best}, {"mean_s", total / n},
                        {"records_per_s", best > 0 ? static_cast<double>(records) / best : 0.0}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
