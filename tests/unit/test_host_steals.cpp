// SPDX-License-Identifier: Apache-2.0
// Host steals on hand-built timelines: a wait for the cgroup's CPU quota
// (a switch-out flagged throttled) is cpu_contention and counted as
// throttled; the loaders' reclaim during the main thread's wait for a batch
// is split out of data_loading, all of it counted apart; interrupt time in
// the main thread's slice is counted; the verdict names the causes that are
// a visible part of the step, and not the ones that are not.
#include <catch2/catch.hpp>

#include <string>

#include "attribution/host_steals.h"
#include "attribution/job_analysis.h"
#include "decode/neuron_cmd.h"
#include "signals/signals_data.h"
#include "steps_events.h"

using namespace steptrace;
using namespace steptrace::test;

namespace {

constexpr uint32_t kRankPid = 2000, kLoaderTid = 2001;
uint64_t base(int k) { return 100 * kMs + static_cast<uint64_t>(k) * 20 * kMs; }

Event steal(uint32_t pid, uint32_t tid, uint64_t end, uint64_t start, uint64_t ns, uint32_t kind, uint32_t detail = 0) {
  st_host_steal e{};
  e.hdr = hdr(ST_EV_HOST_STEAL, sizeof(e), pid, tid, end);
  e.start_ns = start;
  e.ns = ns;
  e.kind = kind;
  e.count = 1;
  e.detail = detail;
  return Event{e};
}

struct Plan {
  uint64_t throttled_ms = 0;     // main thread's quota wait after each execution
  uint64_t loader_reclaim = 0;   // ns in the data wait (and as much again outside it)
  uint64_t softirq_ns = 0;       // in the main thread's slice before the execution
};

// Step k: the main thread waits for a batch [b, b+3 ms) (the loader, always
// on a CPU, hands it over), runs host code, executes [b+5, b+15), runs host
// code to b+20, with the planted steals.
JobAnalysis analyze(const Plan& p, int steps = 6) {
  Feed f;
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
  for (int k = 0; k < steps; ++k) {
    const uint64_t b = base(k);
    f(switch_out(kRankPid, kRankPid, b));
    if (p.loader_reclaim)
      f(steal(kRankPid, kLoaderTid, b + kMs + p.loader_reclaim, b + kMs, p.loader_reclaim, ST_STEAL_MEMCG_RECLAIM));
    f(wakeup(kRankPid, kRankPid, b + 3 * kMs, kRankPid, kLoaderTid));
    f(switch_in(kRankPid, kRankPid, b + 3 * kMs));
    if (p.softirq_ns) f(steal(kRankPid, kRankPid, b + 4 * kMs, 0, p.softirq_ns, ST_STEAL_SOFTIRQ, 1u << 3));
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
    if (p.loader_reclaim)  // the loader reclaims again while the main thread does not wait for it
      f(steal(kRankPid, kLoaderTid, b + 10 * kMs + p.loader_reclaim, b + 10 * kMs, p.loader_reclaim,
              ST_STEAL_MEMCG_RECLAIM));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
    if (p.throttled_ms) {
      Event out = switch_out(kRankPid, kRankPid, b + 16 * kMs, 0);  // runnable
      std::get<st_sched_switch>(out).flags |= ST_SWITCH_THROTTLED;
      f(out);
      f(switch_in(kRankPid, kRankPid, (16 + p.throttled_ms) * kMs + b));
    }
  }
  f.finish(base(steps) + 5 * kMs);
  DropStats drops;
  return analyze_job(f.tl, f.tt, drops);
}

size_t cat(Category c) { return static_cast<size_t>(c); }

const StealFinding* finding(const JobAnalysis& job, StealCause c) {
  for (const auto& f : job.host_steals.findings)
    if (f.cause == c) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("host steals: a wait for the CPU quota is cpu_contention, counted as throttled and named", "[steals][unit]") {
  JobAnalysis job = analyze({.throttled_ms = 3});
  REQUIRE(job.ranks.size() == 1);
  REQUIRE(job.ranks[0].steps.size() >= 5);
  const auto& st = job.ranks[0].steps[2];
  CHECK(st.ns[cat(Category::cpu_contention)] == 3 * kMs);
  CHECK(st.throttled_ns == 3 * kMs);
  CHECK(st.throttled_wait_ns == 3 * kMs);
  CHECK(st.ns[cat(Category::host_overhead)] == 4 * kMs);
  const StealFinding* f = finding(job, StealCause::cpu_throttling);
  REQUIRE(f != nullptr);
  CHECK(f->within == Category::cpu_contention);
  CHECK(f->ns_per_step == Approx(3e6).epsilon(0.01));
  CHECK(f->share == Approx(0.15).epsilon(0.02));
  // 15 % of the step: named in the verdict with the knob, whatever the verdict's category.
  CHECK(job.verdict.headline.find("CPU quota held the main thread off the CPU 3.0 ms/step") != std::string::npos);
  CHECK(job.verdict.recommendation.find("cpu.max") != std::string::npos);
}

TEST_CASE("host steals: an unthrottled run-queue wait is contention with no throttling", "[steals][unit]") {
  // The same wait without the flag: plain contention, nothing named.
  Feed f;
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
  for (int k = 0; k < 6; ++k) {
    const uint64_t b = base(k);
    f(switch_out(kRankPid, kRankPid, b));
    f(wakeup(kRankPid, kRankPid, b + 3 * kMs, kRankPid, kLoaderTid));
    f(switch_in(kRankPid, kRankPid, b + 3 * kMs));
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
    f(switch_out(kRankPid, kRankPid, b + 16 * kMs, 0));
    f(switch_in(kRankPid, kRankPid, b + 19 * kMs));
  }
  f.finish(base(6) + 5 * kMs);
  DropStats drops;
  JobAnalysis job = analyze_job(f.tl, f.tt, drops);
  REQUIRE(job.ranks.size() == 1);
  CHECK(job.ranks[0].steps[2].ns[cat(Category::cpu_contention)] == 3 * kMs);
  CHECK(job.ranks[0].steps[2].throttled_ns == 0);
  CHECK(job.host_steals.findings.empty());
  CHECK(job.verdict.headline.find("quota") == std::string::npos);
}

TEST_CASE("host steals: the loaders' reclaim splits data loading and is named beside a data-loading verdict",
          "[steals][unit]") {
  JobAnalysis job = analyze({.loader_reclaim = 1 * kMs});
  REQUIRE(job.ranks.size() == 1);
  const auto& st = job.ranks[0].steps[2];
  CHECK(st.ns[cat(Category::data_loading)] == 3 * kMs);
  // One of the loader's three busy milliseconds of the wait was reclaim.
  CHECK(st.data_reclaim_ns == Approx(1e6).margin(1000));
  CHECK(st.data_storage_ns + st.data_preprocess_ns + st.data_reclaim_ns == 3 * kMs);
  // All of it, the pass outside the wait too.
  CHECK(st.loader_reclaim_ns == 2 * kMs);
  const StealFinding* f = finding(job, StealCause::loader_reclaim);
  REQUIRE(f != nullptr);
  CHECK(f->within == Category::data_loading);
  CHECK(f->ns_per_step == Approx(2e6).epsilon(0.01));
  CHECK(f->text.find("1.0 ms/step of it while the main thread waited") != std::string::npos);
  bool evidence = false;
  for (const auto& e : job.verdict.evidence) evidence = evidence || e.rfind("host steal: the loaders were in", 0) == 0;
  CHECK(evidence);
}

TEST_CASE("host steals: softirq time in the main thread's slice is counted with its vector, named only when visible",
          "[steals][unit]") {
  SECTION("0.2 ms of a 20 ms step: counted, not named") {
    JobAnalysis job = analyze({.softirq_ns = 200'000});
    const auto& st = job.ranks[0].steps[2];
    CHECK(st.softirq_ns == 200'000);
    CHECK(st.softirq_vecs == (1u << 3));
    CHECK(finding(job, StealCause::interrupts) == nullptr);
  }
  SECTION("2 ms of a 20 ms step: named with NET_RX and the knob") {
    JobAnalysis job = analyze({.softirq_ns = 2 * kMs});
    const StealFinding* f = finding(job, StealCause::interrupts);
    REQUIRE(f != nullptr);
    CHECK(f->text.find("softirq NET_RX") != std::string::npos);
    CHECK(f->recommendation.find("smp_affinity") != std::string::npos);
    CHECK(f->share == Approx(0.10).epsilon(0.02));
  }
}

TEST_CASE("host steals: loader reclaim the main thread never waits for is not named", "[steals][unit]") {
  // Loaders that keep ahead: the main thread takes its batch at once.
  Feed f;
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
  for (int k = 0; k < 6; ++k) {
    const uint64_t b = base(k);
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
    f(steal(kRankPid, kLoaderTid, b + 12 * kMs, b + 8 * kMs, 4 * kMs, ST_STEAL_MEMCG_RECLAIM));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
  }
  f.finish(base(6) + 5 * kMs);
  DropStats drops;
  JobAnalysis job = analyze_job(f.tl, f.tt, drops);
  REQUIRE(job.ranks.size() == 1);
  REQUIRE(job.host_steals.ranks.size() == 1);
  CHECK(job.host_steals.ranks[0].loader_reclaim_ns > 3e6);
  CHECK(finding(job, StealCause::loader_reclaim) == nullptr);
}

TEST_CASE("host steals: softirq vector names", "[steals][unit]") {
  CHECK(softirq_vec_names(0).empty());
  CHECK(softirq_vec_names((1u << 3) | (1u << 1)) == "TIMER,NET_RX");
  CHECK(softirq_vec_names(1u << 12) == "vec12");
}

TEST_CASE("host steals: a main thread that runs off its device's NUMA node is named, one on it is not",
          "[steals][unit]") {
  // Two nodes of one CPU each; neuron0 on node 0. The main thread's slices
  // run on `cpu` (the CPU in each switch-out's header).
  auto job_on = [](uint32_t cpu) {
    Feed f;
    f(switch_in(kRankPid, kRankPid, 50 * kMs));
    f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
    for (int k = 0; k < 6; ++k) {
      const uint64_t b = base(k);
      Event out = switch_out(kRankPid, kRankPid, b);
      std::get<st_sched_switch>(out).hdr.cpu = cpu;
      f(out);
      f(wakeup(kRankPid, kRankPid, b + 3 * kMs, kRankPid, kLoaderTid));
      f(switch_in(kRankPid, kRankPid, b + 3 * kMs));
      f(ioctl(kRankPid, kRankPid, b + 4 * kMs, b + 4 * kMs + 100'000, NEURON_CMD_MEM_COPY));
      f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
      f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
    }
    f.finish(base(6) + 5 * kMs);
    signals::SignalsData sd;
    sd.numa.cpu_node = {0, 1};
    sd.numa.nodes = 2;
    sd.numa.device_node[0] = 0;
    sd.numa.device_bdf[0] = "0000:10:1e.0";
    AnalysisOptions opt;
    opt.device_signals = &sd;
    DropStats drops;
    return analyze_job(f.tl, f.tt, drops, opt);
  };
  JobAnalysis remote = job_on(1);
  REQUIRE(remote.ranks.size() == 1);
  CHECK(remote.ranks[0].numa.device == 0);
  CHECK(remote.ranks[0].numa.device_node == 0);
  const auto& st = remote.ranks[0].steps[2];
  // On a CPU from the batch to the step's end: 17 of its 20 ms, all on node 1.
  CHECK(st.on_cpu_ns == 17 * kMs);
  CHECK(st.remote_node_ns == 17 * kMs);
  const StealFinding* f = finding(remote, StealCause::numa_remote);
  REQUIRE(f != nullptr);
  CHECK(f->text.find("off node 0, the node of neuron0 at 0000:10:1e.0") != std::string::npos);
  CHECK(remote.verdict.recommendation.find("numactl --cpunodebind") != std::string::npos);
  // Placement is not time taken: it is evidence, not the headline.
  CHECK(remote.verdict.headline.find("NUMA") == std::string::npos);

  JobAnalysis local = job_on(0);
  CHECK(local.ranks[0].steps[2].on_cpu_ns == 17 * kMs);
  CHECK(local.ranks[0].steps[2].remote_node_ns == 0);
  CHECK(finding(local, StealCause::numa_remote) == nullptr);
}

TEST_CASE("device memory: each device's memory now, at its peak and by kind, from the sysfs samples",
          "[signals][unit]") {
  Feed f;
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  for (int k = 0; k < 4; ++k) {
    const uint64_t b = base(k);
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
  }
  f.finish(base(4));
  signals::SignalsData sd;
  constexpr uint64_t kMiB = 1024 * 1024;
  auto sample = [&](uint64_t ts, int dev, uint64_t tensors0, uint64_t tensors1, uint64_t code) {
    signals::SysfsSample s;
    s.ts = ts;
    s.device = dev;
    s.v["neuron_core0/memory_usage/device_mem/tensors"] = tensors0;
    s.v["neuron_core1/memory_usage/device_mem/tensors"] = tensors1;
    s.v["neuron_core0/memory_usage/device_mem/model_code"] = code;
    s.v["host_mem/tensors"] = 3 * kMiB;
    s.v["neuron_core0/status/success"] = ts;  // a status counter: not memory
    sd.sysfs.push_back(s);
  };
  sample(base(0), 0, 100 * kMiB, 0, 10 * kMiB);
  sample(base(1), 0, 500 * kMiB, 200 * kMiB, 10 * kMiB);  // the peak: 710 MiB
  sample(base(2), 0, 300 * kMiB, 0, 10 * kMiB);
  sample(base(2), 1, 0, 0, 0);  // a device with nothing allocated
  AnalysisOptions opt;
  opt.device_signals = &sd;
  DropStats drops;
  JobAnalysis job = analyze_job(f.tl, f.tt, drops, opt);
  const auto& mem = job.signals.device_memory;
  REQUIRE(mem.size() == 2);
  CHECK(mem[0].device == 0);
  CHECK(mem[0].now_bytes == 310 * kMiB);
  CHECK(mem[0].peak_bytes == 710 * kMiB);
  CHECK(mem[0].host_bytes == 3 * kMiB);
  CHECK(mem[0].by_kind.at("tensors") == 300 * kMiB);
  CHECK(mem[0].by_kind.at("model_code") == 10 * kMiB);
  CHECK(mem[1].peak_bytes == 0);
  bool evidence = false;
  for (const auto& e : job.verdict.evidence)
    evidence = evidence || e.find("device memory in use (Neuron sysfs): neuron0 0.30 GiB (peak 0.69 GiB") == 0;
  CHECK(evidence);
}
