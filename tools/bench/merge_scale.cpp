// SPDX-License-Identifier: Apache-2.0
// merge_scale: the cost of `steptrace report A.cap B.cap ...` past replay -
// the merge itself (multinode/job_merge.h) - as a job grows. It builds one
// analysed report per node in memory, as replaying that node's capture
// would leave it (steps per rank, launcher identities, clock anchors of a
// clock with its own offset and drift, TCP stream marks exchanged with the
// next node of a ring), with one rank on the last node late at every
// collective, then merges them. Replay is per capture and already measured
// (docs/performance.md); what must stay linear in the node count is the
// merge: the pairing, the culprit and the network fit.
//   merge_scale --nodes N [--ranks-per-node 32] [--steps 180] [--marks 20000]
// Prints one JSON line: build and merge seconds, peak RSS after building and
// after merging, the merge's own peak of live heap (every operator new less
// every delete, from the merge's start: the RSS difference hides what the
// merge reuses of the heap the build freed), the culprit named (the planted
// one, or the run is wrong).
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "multinode/job_merge.h"

using namespace steptrace;

// The heap this program holds through operator new, and its peak since the
// last reset (one thread: the merge runs on the caller's).
namespace {
size_t g_live = 0, g_peak = 0;
void* counted_alloc(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  g_live += malloc_usable_size(p);
  g_peak = std::max(g_peak, g_live);
  return p;
}
void counted_free(void* p) noexcept {
  if (!p) return;
  g_live -= malloc_usable_size(p);
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
// The nothrow forms too (std::stable_sort's buffer comes from one): every
// unaligned new is paired with this delete, or ASan reports a mismatch.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr size_t kColl = static_cast<size_t>(Category::collective);
constexpr size_t kData = static_cast<size_t>(Category::data_loading);
constexpr size_t kDev = static_cast<size_t>(Category::device_execute);

struct Args {
  int nodes = 8, ranks_per_node = 32, steps = 180, marks = 20000;
};

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Node n: its monotonic clock reads wall - wall0 + n * 1 s, its wall clock
// runs n ppm fast; steps of 1 s (a large model's), 600 ms on the device, the
// collective ends together on every rank; the last rank of the last node
// loads its batch `late` longer.
void build_node(SessionReport& r, const Args& a, int n, int64_t wall0, const std::string& job) {
  const uint64_t mono0 = 1'000'000 * kMs + static_cast<uint64_t>(n) * 1000 * kMs;
  const double ppm = n;
  r.source.host = "node-" + std::to_string(n);
  r.source.boot_id = "boot-" + std::to_string(n);
  const uint64_t span = static_cast<uint64_t>(a.steps + 2) * 1000 * kMs;
  auto mono_of = [&](int64_t t_ns) {  // t: true ns since wall0, on this node's clock
    const double d = static_cast<double>(t_ns) / (1 + ppm * 1e-6);
    return mono0 + static_cast<uint64_t>(d);
  };
  for (uint64_t m = mono0; m <= mono0 + span; m += 10'000 * kMs) {
    const double d = static_cast<double>(m - mono0);
    ClockAnchor k{m, wall0 + static_cast<int64_t>(d + d * ppm * 1e-6), 40};
    k.wall_max_error_us = 2000;
    r.analysis.clock.add(k);
  }
  const int world = a.nodes * a.ranks_per_node;
  const uint64_t late = 80 * kMs;
  for (int i = 0; i < a.ranks_per_node; ++i) {
    const int g = n * a.ranks_per_node + i;
    const bool straggler = g == world - 1;
    RankResult rr;
    rr.rank = i;
    rr.pid = 1000 + static_cast<uint32_t>(i);
    rr.steps.reserve(static_cast<size_t>(a.steps));
    for (int k = 0; k < a.steps; ++k) {
      StepResult st;
      st.index = k;
      st.start_ns = mono_of(static_cast<int64_t>(k) * 1000 * static_cast<int64_t>(kMs));
      st.end_ns = mono_of(static_cast<int64_t>(k + 1) * 1000 * static_cast<int64_t>(kMs));
      st.ns[kDev] = 600 * kMs;
      st.ns[kData] = 20 * kMs + (straggler ? late : 0);
      st.ns[kColl] = 1000 * kMs - st.ns[kDev] - st.ns[kData];
      st.data_preprocess_ns = st.ns[kData];
      st.host_collective = true;
      st.arrival_ns = st.end_ns - st.ns[kColl];
      rr.steps.push_back(st);
    }
    rr.steps_total = rr.counted_steps = static_cast<uint64_t>(a.steps);
    r.job.ranks.push_back(std::move(rr));
    ProcIdentity id;
    id.job = job;
    id.env = {{"RANK", std::to_string(g)},
              {"GROUP_RANK", std::to_string(n)},
              {"LOCAL_RANK", std::to_string(i)},
              {"WORLD_SIZE", std::to_string(world)}};
    r.analysis.notes.identities[1000 + static_cast<uint32_t>(i)] = id;
  }
  r.job.verdict.category = Category::collective;
  r.job.verdict.headline = "collectives gate the accelerator";
  // A ring both ways: bytes to node n+1 and back (port 40000 forward, 40001
  // backward), 20-60 us on the wire, the same messages as the neighbours
  // record them (true time; the clocks as above).
  r.analysis.streams.enable();
  auto addr_of = [](int node, uint8_t (&out)[16]) {
    for (auto& b : out) b = 0;
    out[10] = out[11] = 0xff;
    out[12] = 10;
    out[14] = static_cast<uint8_t>(node >> 8);
    out[15] = static_cast<uint8_t>(node);
  };
  uint8_t self[16], next[16], prev[16];
  addr_of(n, self);
  addr_of((n + 1) % a.nodes, next);
  addr_of((n + a.nodes - 1) % a.nodes, prev);
  const uint64_t fwd_out = stream_flow_id(self, 40000, next, 40000), fwd_in = stream_flow_id(prev, 40000, self, 40000);
  const uint64_t back_out = stream_flow_id(self, 40001, prev, 40001), back_in = stream_flow_id(next, 40001, self, 40001);
  const int per_kind = std::max(1, a.marks / 4);
  for (int k = 0; k < per_kind; ++k) {
    const int64_t t = static_cast<int64_t>(k) * static_cast<int64_t>(span / static_cast<uint64_t>(per_kind + 1));
    const int64_t t2 = t + 500'000;
    const uint32_t seq = (static_cast<uint32_t>(k) + 1u) * 4096u;  // wraps as TCP does
    // A spread of 20-59 us (int64: --marks can be large).
    const int64_t kk = k, wire = (20 + (kk * 7919) % 40) * 1000, wire2 = (20 + (kk * 104729) % 40) * 1000;
    r.analysis.streams.add({fwd_out, mono_of(t), mono_of(t + 3000), seq, 4096, true});
    r.analysis.streams.add({fwd_in, mono_of(t + 3000 + wire), mono_of(t + 8000 + wire), seq, 4096, false});
    r.analysis.streams.add({back_out, mono_of(t2), mono_of(t2 + 3000), seq, 4096, true});
    r.analysis.streams.add({back_in, mono_of(t2 + 3000 + wire2), mono_of(t2 + 8000 + wire2), seq, 4096, false});
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (v <= 0) {
      std::fprintf(stderr, "merge_scale: %s needs a positive number\n", k.c_str());
      return 2;
    }
    if (k == "--nodes") a.nodes = v;
    else if (k == "--ranks-per-node") a.ranks_per_node = v;
    else if (k == "--steps") a.steps = v;
    else if (k == "--marks") a.marks = v;
    else {
      std::fprintf(stderr, "usage: merge_scale --nodes N [--ranks-per-node R] [--steps S] [--marks M]\n");
      return 2;
    }
  }
  if (a.nodes < 2) {
    std::fprintf(stderr, "merge_scale: --nodes must be at least 2\n");
    return 2;
  }
  const double rss0 = peak_rss_mib();
  const auto t0 = std::chrono::steady_clock::now();
  std::deque<SessionReport> reports;
  std::vector<JobInput> inputs;
  std::vector<std::string> paths;
  for (int n = 0; n < a.nodes; ++n) paths.push_back("node" + std::to_string(n) + ".cap");
  for (int n = 0; n < a.nodes; ++n) {
    reports.emplace_back();
    build_node(reports.back(), a, n, 1'800'000'000'000'000'000, "bench-job");
    inputs.push_back({paths[static_cast<size_t>(n)], &reports.back()});
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double rss_built = peak_rss_mib();
  const size_t heap_built = g_live;
  g_peak = g_live;
  const JobReport job = merge_job(inputs);
  const auto t2 = std::chrono::steady_clock::now();
  const double rss_merged = peak_rss_mib();
  const double merge_heap_peak_mib = static_cast<double>(g_peak - heap_built) / (1024.0 * 1024.0);
  const double merge_heap_kept_mib = static_cast<double>(g_live - heap_built) / (1024.0 * 1024.0);
  size_t network_fitted = 0;
  uint64_t worst_bound = 0;
  for (const auto& h : job.hosts)
    if (h.clock.method == AlignmentMethod::network) {
      ++network_fitted;
      worst_bound = std::max(worst_bound, h.clock.net_bound_ns);
    }
  const bool named = job.culprit.found && job.ranks[job.culprit.rank].global_rank == a.nodes * a.ranks_per_node - 1;
  nlohmann::json j = {{"nodes", a.nodes},
                      {"ranks", a.nodes * a.ranks_per_node},
                      {"steps_per_rank", a.steps},
                      {"marks_per_node", a.marks},
                      {"build_s", std::chrono::duration<double>(t1 - t0).count()},
                      {"merge_s", std::chrono::duration<double>(t2 - t1).count()},
                      {"rss_start_mib", rss0},
                      {"rss_built_mib", rss_built},
                      {"rss_merged_mib", rss_merged},
                      {"heap_built_mib", static_cast<double>(heap_built) / (1024.0 * 1024.0)},
                      {"merge_heap_peak_mib", merge_heap_peak_mib},
                      {"merge_heap_kept_mib", merge_heap_kept_mib},
                      {"paired_steps", job.job_steps},
                      {"network_fitted_hosts", network_fitted},
                      {"worst_network_bound_ns", worst_bound},
                      {"culprit_named", named}};
  std::printf("%s\n", j.dump().c_str());
  return named && network_fitted + 1 == static_cast<size_t>(a.nodes) ? 0 : 1;
}
