// SPDX-License-Identifier: Apache-2.0
// [root] Device counters against trainsim's ground truth: the NDS split of
// device execute into device compute and device collective per step, the
// EFA network-bound test, proxy threads, and the fallback without NDS.
#include <catch2/catch.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <filesystem>

#include "device/nds_layout.h"
#include "pipeline/replay.h"
#include "session/session.h"
#include "signals/counters.h"
#include "truth.h"

using namespace steptrace;
namespace tr = trainsim::truth;

namespace {

struct Run {
  SessionReport report;
  tr::Truth truth;
};

void require_root() {
  INFO("[root] tests load BPF programs and mount FUSE: run them as root");
  REQUIRE(geteuid() == 0);
}

// `prepare` writes into the fake sysfs root before the run (the simulator
// adds its devices' metrics there).
// `record_to`: also record the session into this capture.
Run run_sim(const std::string& scenario, std::vector<std::string> extra,
            const std::function<void(const std::string& sys)>& prepare = {}, const std::string& record_to = "") {
  char t[] = "/tmp/st-sig-acc.XXXXXX";
  REQUIRE(mkdtemp(t) != nullptr);
  std::string dir = t, dev = dir + "/dev", sys = dir + "/sys";
  std::filesystem::create_directory(dev);
  if (prepare) prepare(sys);
  Options o;
  o.command = CommandKind::run;
  o.subsystems = *parse_subsystems("all");
  o.accel_devs = {dev + "/neuron0", dev + "/neuron1"};
  o.rdma_devs = {dev + "/uverbs0"};
  o.sysfs_root = sys;
  o.dev_root = dev;
  o.duration_s = 120;
  o.record_path = record_to;
  o.argv = {TRAINSIM_BIN, "--scenario", scenario, "--dev-dir", dev, "--sysfs-root", sys, "--truth", dir + "/truth.json"};
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  auto s = Session::start(o);
  REQUIRE(s.ok());
  REQUIRE((*s)->run_loop(nullptr).ok());
  auto rep = (*s)->finish();
  REQUIRE(rep.ok());
  REQUIRE(rep->job_exit_code == 0);
  std::string err;
  auto truth = tr::load(dir + "/truth.json", &err);
  REQUIRE(truth.has_value());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return Run{std::move(*rep), std::move(*truth)};
}

const StepResult* match(const RankResult& r, const tr::Step& ts) {
  const StepResult* best = nullptr;
  uint64_t best_ov = 0;
  for (const auto& st : r.steps) {
    uint64_t s = std::max<uint64_t>(st.start_ns, static_cast<uint64_t>(ts.start_ns));
    uint64_t e = std::min<uint64_t>(st.end_ns, static_cast<uint64_t>(ts.end_ns));
    if (e > s && e - s > best_ov) {
      best_ov = e - s;
      best = &st;
    }
  }
  return best;
}

// Per counted step: tracer device compute / collective vs the truth's
// exec_compute / exec_collective phases. Prints the per-step split.
void check_split(const Run& run, const char* label) {
  const auto& job = run.report.job;
  REQUIRE(job.ranks.size() == run.truth.rank_data.size());
  int checked = 0, steps = 0;
  for (const auto& tr_rank : run.truth.rank_data) {
    const RankResult* r = nullptr;
    for (const auto& rr : job.ranks)
      if (rr.pid == static_cast<uint32_t>(tr_rank.pid)) r = &rr;
    REQUIRE(r != nullptr);
    for (const auto& ts : tr_rank.steps) {
      if (ts.index < 1) continue;
      const StepResult* st = match(*r, ts);
      REQUIRE(st != nullptr);
      // Device truth: what the fake device did by its own timestamps (the
      // engine can start late or overshoot its plan on a busy host).
      double tc = static_cast<double>(ts.device_compute_actual_ns) / 1e6;
      double tx = static_cast<double>(ts.device_collective_actual_ns) / 1e6;
      double mc = static_cast<double>(st->dev.compute_ns) / 1e6;
      double mx = static_cast<double>(st->dev.cc_ns) / 1e6;
      std::printf("%s rank %d step %2d: device compute %7.3f ms (truth %7.3f)  device collective %7.3f ms (truth %7.3f)\n",
                  label, tr_rank.rank, ts.index, mc, tc, mx, tx);
      INFO(label << " rank " << tr_rank.rank << " step " << ts.index);
      ++steps;
      if (!st->dev.nds) continue;  // two executions between two drain ticks (a stalled tracer)
      CHECK(mc == Approx(tc).epsilon(0.05).margin(0.1));
      CHECK(mx == Approx(tx).epsilon(0.05).margin(0.1));
      ++checked;
    }
  }
  CHECK(checked >= 10);
  CHECK(checked * 10 >= steps * 9);  // at most one step in ten without its own datastore sample
  CHECK(job.signals.nds.available);
  CHECK(job.signals.split_from_nds);
}

bool evidence_has(const Verdict& v, const std::string& s) {
  for (const auto& e : v.evidence)
    if (e.find(s) != std::string::npos) return true;
  return false;
}

// The EFA control path: every uverbs call the fake runtime made (its own
// timestamps around the syscall) against what steptrace reports per rank and
// phase. Returns the number of in-step calls the truth has.
int check_fabric(const Run& run, const char* label) {
  const auto& job = run.report.job;
  int truth_in_steps = 0;
  for (const auto& tr_rank : run.truth.rank_data) {
    INFO(label << " rank " << tr_rank.rank);
    REQUIRE_FALSE(tr_rank.verbs.empty());
    REQUIRE_FALSE(tr_rank.steps.empty());
    const RankFabric* f = nullptr;
    for (const auto& rf : job.fabric.ranks)
      if (rf.pid == static_cast<uint32_t>(tr_rank.pid)) f = &rf;
    REQUIRE(f != nullptr);
    // The truth's calls by phase, by its own step boundaries.
    struct Want {
      std::map<std::string, int> calls;
      uint64_t bytes = 0;
      int64_t ns = 0;
      int64_t longest_ns = 0;
      int n = 0;
    } want[3];
    for (const auto& v : tr_rank.verbs) {
      CHECK(v.ret == 0);
      int ph = v.enter_ns < tr_rank.steps.front().start_ns ? 0 : v.enter_ns >= tr_rank.steps.back().end_ns ? 2 : 1;
      ++want[ph].calls[v.name];
      ++want[ph].n;
      want[ph].ns += v.return_ns - v.enter_ns;
      want[ph].longest_ns = std::max<int64_t>(want[ph].longest_ns, v.return_ns - v.enter_ns);
      if (v.name.find("reg_") == 0 || v.name.find("reg_dmabuf") == 0) want[ph].bytes += v.bytes;
    }
    truth_in_steps += want[1].n;
    const FabricPhase* got[3] = {&f->setup, &f->in_steps, &f->teardown};
    const char* names[3] = {"setup", "in steps", "teardown"};
    for (int ph = 0; ph < 3; ++ph) {
      INFO(names[ph]);
      std::map<std::string, int> calls;
      for (const auto& v : got[ph]->verbs) calls[v.name] = static_cast<int>(v.calls);
      CHECK(calls == want[ph].calls);
      CHECK(got[ph]->bytes == want[ph].bytes);
      CHECK(got[ph]->errors == 0);
      // The syscall lies inside the runtime's two timestamps. Those also hold
      // any time the thread was preempted on its way back to user space
      // (after the exit hook): on two CPUs one call in a phase can be
      // stretched by milliseconds, so the lower bound leaves out the longest.
      double g = static_cast<double>(got[ph]->total_ns) / 1e6, w = static_cast<double>(want[ph].ns) / 1e6;
      double w_but_longest = static_cast<double>(want[ph].ns - want[ph].longest_ns) / 1e6;
      std::printf("%s rank %d %-8s: %2llu calls %7.3f ms traced, truth %2d calls %7.3f ms\n", label, tr_rank.rank,
                  names[ph], static_cast<unsigned long long>(got[ph]->calls), g, want[ph].n, w);
      CHECK(g <= w + 0.05);
      CHECK(g >= 0.8 * w_but_longest - 0.05 * want[ph].n);
    }
  }
  return truth_in_steps;
}

}  // namespace

TEST_CASE("signals: the EFA control path is traced as setup events and registrations inside steps are evidence",
          "[root][signals]") {
  require_root();
  {
    // Set up at load, torn down at close: setup events, nothing in the steps.
    auto run = run_sim("compute-bound", {"--steps", "8"});
    CHECK(check_fabric(run, "load only") == 0);
    for (const auto& f : run.report.job.fabric.ranks) {
      CHECK(f.setup.calls == 7);  // get_context (write path), query_device, alloc_pd, create_cq, 2 create_qp, reg
      CHECK(f.counted_steps_with_calls == 0);
    }
    CHECK_FALSE(evidence_has(run.report.job.verdict, "EFA control path inside steps"));
  }
  {
    // A registration cache that misses: an 8 MiB buffer registered and dropped in every step.
    auto run = run_sim("compute-bound", {"--steps", "10", "--mr-per-step-bytes", "8m"});
    CHECK(check_fabric(run, "per step") == 2 * 2 * 10);
    for (const auto& r : run.report.job.ranks)
      for (const auto& st : r.steps) {
        INFO("rank " << r.rank << " step " << st.index);
        CHECK(st.fabric_calls == 2);
        CHECK(st.fabric_reg_bytes == (8u << 20));
      }
    CHECK(evidence_has(run.report.job.verdict, "EFA control path inside steps"));
    CHECK(evidence_has(run.report.job.verdict, "8.0 MiB registered/step"));
  }
}

TEST_CASE("signals: the sim's datastore layout matches the reader's", "[signals]") {
  for (int nc : {0, 1, 3, 4, 7, 15})
    for (int k : {0, 1, 13, 14, 15, 21, 28, 29, 31})
      CHECK(trainsim::nds::nc_counter_offset(nc, k) == signals::nds_nc_offset(nc, k));
}

TEST_CASE("signals: compute-bound executions split by NDS within 5% of the truth", "[root][signals]") {
  require_root();
  auto run = run_sim("compute-bound", {"--steps", "14", "--device-cc-bytes", "32m", "--link-gbps", "5"});
  check_split(run, "compute-bound");
  const auto& job = run.report.job;
  CHECK(job.signals.execution_bound == "compute");
  // On a small host the device collective's barrier wait and proxy delays
  // can be large; the verdict must still name device time or the collective.
  CHECK((job.verdict.category == Category::device_execute || job.verdict.category == Category::collective));
  CHECK(evidence_has(job.verdict, "executions are compute-bound"));
  CHECK(job.verdict.headline.find("compute-bound per NDS") != std::string::npos);
  CHECK(evidence_has(job.verdict, "NDS yes"));
  // 32 MiB of device RDMA per step on each rank's adapter.
  CHECK(job.signals.efa.available);
  CHECK(job.signals.efa_mib_per_step == Approx(32.0).epsilon(0.1));
  CHECK_FALSE(job.signals.network_bound);
  // The runtime's proxy threads drive the device collective.
  REQUIRE(job.signals.proxies.size() == 2);
  for (const auto& p : job.signals.proxies) CHECK(p.comm == "nccom-proxy0");
  // Neuron sysfs: every execution counted as success.
  CHECK(job.signals.neuron_sysfs.available);
  bool success = false;
  for (const auto& [k, v] : job.signals.sysfs_deltas) success |= k.find("status/success") != std::string::npos && v > 0;
  CHECK(success);
}

TEST_CASE("signals: collective-bound executions split by NDS within 5%, network-bound fires", "[root][signals]") {
  require_root();
  auto run = run_sim("collective-bound", {"--steps", "14", "--device-cc-bytes", "32m", "--link-gbps", "2"});
  check_split(run, "collective-bound");
  const auto& job = run.report.job;
  CHECK(job.signals.execution_bound == "collective");
  CHECK(job.verdict.category == Category::collective);
  CHECK(evidence_has(job.verdict, "executions are collective-bound"));
  CHECK(job.signals.network_bound);
}

TEST_CASE("signals: the network-bound test fires on a rate-limited host collective, not on a straggler",
          "[root][signals]") {
  require_root();
  {
    auto run = run_sim("collective-bound", {"--steps", "12"});
    const auto& s = run.report.job.signals;
    REQUIRE(s.efa.available);
    CHECK(s.link_gbit == Approx(3.2));
    std::printf("collective-bound: EFA achieved %.2f of %.2f Gbit/s (ratio %.2f)\n", s.achieved_gbit, s.link_gbit,
                s.net_ratio);
    CHECK(s.net_ratio > 0.7);
    CHECK(s.network_bound);
    CHECK(evidence_has(run.report.job.verdict, "network-bound collective"));
  }
  {
    auto run = run_sim("straggler", {"--steps", "10"});
    const auto& s = run.report.job.signals;
    REQUIRE(s.efa.available);
    CHECK(s.net_ratio >= 0);
    std::printf("straggler: EFA achieved %.2f of %.2f Gbit/s (ratio %.3f)\n", s.achieved_gbit, s.link_gbit,
                s.net_ratio);
    CHECK(s.net_ratio < 0.2);
    CHECK_FALSE(s.network_bound);
    CHECK(evidence_has(run.report.job.verdict, "not network-bound"));
  }
}

// A long session folds its windows (pipeline/step_ledger.h): the device
// signals' job summary must add up the steps of every window, as one window
// over the whole session does, not the last window's alone.
TEST_CASE("signals: a session folded every half second sums the device signals of every window as one window does",
          "[root][signals]") {
  require_root();
  const std::string cap = "/tmp/st-sig-fold-" + std::to_string(getpid()) + ".cap";
  auto run = run_sim("collective-bound", {"--steps", "40", "--device-cc-bytes", "32m", "--link-gbps", "2"}, {}, cap);
  auto whole = replay_capture(cap);
  auto folded = replay_capture(cap, WindowPolicy::from(0.5, 0, 4096));
  std::remove(cap.c_str());
  REQUIRE(whole.ok());
  REQUIRE(folded.ok());
  CHECK(whole->windows.folds == 0);
  CHECK(folded->windows.folds >= 4);
  const auto& a = whole->job.signals;
  const auto& b = folded->job.signals;
  REQUIRE(a.split_from_nds);
  CHECK(b.split_from_nds);
  // The folded summary is over the merged steps (every one kept in detail here).
  double sum_cc = 0, sum_compute = 0;
  int nds_steps = 0;
  for (const auto& r : folded->job.ranks)
    for (const auto& st : r.steps)
      if (st.index >= folded->job.skipped_warmup_steps && st.dev.nds) {
        sum_cc += static_cast<double>(st.dev.cc_ns) / 1e6;
        sum_compute += static_cast<double>(st.dev.compute_ns) / 1e6;
        ++nds_steps;
      }
  REQUIRE(nds_steps >= 60);
  CHECK(b.mean_cc_ms == Approx(sum_cc / nds_steps).epsilon(1e-9));
  CHECK(b.mean_compute_ms == Approx(sum_compute / nds_steps).epsilon(1e-9));
  // The proxies' delay and preemptions: every counted step of a rank with a
  // proxy, whichever window named it.
  double runq_ms = 0, preempted = 0;
  int proxy_steps = 0;
  for (const auto& r : folded->job.ranks) {
    bool has = false;
    for (const auto& p : b.proxies) has |= p.pid == r.pid;
    if (!has) continue;
    for (const auto& st : r.steps)
      if (st.index >= folded->job.skipped_warmup_steps) {
        runq_ms += static_cast<double>(st.dev.proxy_runq_ns) / 1e6;
        preempted += st.dev.proxy_preempted;
        ++proxy_steps;
      }
  }
  REQUIRE(proxy_steps >= 60);
  CHECK(b.proxy_runq_ms_per_step == Approx(runq_ms / proxy_steps).epsilon(1e-9));
  CHECK(b.proxy_preempted_per_step == Approx(preempted / proxy_steps).epsilon(1e-9));
  std::printf("whole: cc %.3f compute %.3f ms, net %.3f, %.2f MiB/step, proxy %.3f ms/step %.2f preempted/step by %s\n",
              a.mean_cc_ms, a.mean_compute_ms, a.net_ratio, a.efa_mib_per_step, a.proxy_runq_ms_per_step,
              a.proxy_preempted_per_step, a.proxy_top_preemptor);
  std::printf("folded: cc %.3f compute %.3f ms, net %.3f, %.2f MiB/step, proxy %.3f ms/step %.2f preempted/step by %s\n",
              b.mean_cc_ms, b.mean_compute_ms, b.net_ratio, b.efa_mib_per_step, b.proxy_runq_ms_per_step,
              b.proxy_preempted_per_step, b.proxy_top_preemptor);
  for (const auto* s : {&a, &b})
    for (const auto& p : s->proxies)
      std::printf("%s: proxy %s/%u (%s)\n", s == &a ? "whole" : "folded", p.comm.c_str(), p.tid, p.how.c_str());
  // And it says what the whole-session window says.
  CHECK(b.mean_cc_ms == Approx(a.mean_cc_ms).epsilon(0.01));
  CHECK(b.mean_compute_ms == Approx(a.mean_compute_ms).epsilon(0.01));
  CHECK(b.execution_bound == a.execution_bound);
  CHECK(b.net_ratio == Approx(a.net_ratio).epsilon(0.02));
  CHECK(b.network_bound == a.network_bound);
  CHECK(b.efa_mib_per_step == Approx(a.efa_mib_per_step).epsilon(0.01));
  // The runtime's proxies are named by both. Others are named by behaviour
  // (running inside most device collectives), which each window judges on
  // its own steps: a thread at the edge can be named by one and not by the
  // whole (the sim's EFA counter flusher is), so the delay figures are not
  // compared here.
  auto named = [](const signals::DeviceSignalsSummary& s) {
    int n = 0;
    for (const auto& p : s.proxies) n += p.comm == "nccom-proxy0";
    return n;
  };
  CHECK(named(a) == 2);
  CHECK(named(b) == 2);
}

TEST_CASE("signals: without a datastore (old driver) the split falls back to arrival skew", "[root][signals]") {
  require_root();
  auto run = run_sim("compute-bound", {"--steps", "8", "--nds", "0", "--device-cc-bytes", "32m", "--link-gbps", "5"});
  const auto& job = run.report.job;
  CHECK_FALSE(job.signals.nds.available);
  CHECK(job.signals.nds.detail.find("old driver") != std::string::npos);
  CHECK_FALSE(job.signals.split_from_nds);
  CHECK(evidence_has(job.verdict, "arrival skew"));
  for (const auto& r : job.ranks)
    for (const auto& st : r.steps) CHECK_FALSE(st.dev.nds);
}

TEST_CASE("signals: a rank whose main thread runs off its device's NUMA node is named, the other is not",
          "[root][signals][steals]") {
  require_root();
  // A one-node VM cannot misplace a thread: the fake sysfs gives each CPU a
  // node of its own and both devices node 0. --pin-main pins rank r's main
  // thread to CPU r % ncpus, so rank 0 runs on its device's node and rank 1
  // (CPU 1, node 1) on the other.
  REQUIRE(sysconf(_SC_NPROCESSORS_ONLN) >= 2);
  auto put = [](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  };
  auto run = run_sim("compute-bound", {"--pin-main", "--steps", "12"}, [&](const std::string& sys) {
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    put(sys + "/devices/system/node/node0/cpulist", "0\n");
    put(sys + "/devices/system/node/node1/cpulist", "1-" + std::to_string(ncpu - 1) + "\n");
    for (const char* bdf : {"0000:10:1e.0", "0000:10:1f.0"}) {
      put(sys + "/bus/pci/devices/" + bdf + "/vendor", "0x1d0f\n");
      put(sys + "/bus/pci/devices/" + bdf + "/device", "0x7164\n");
      put(sys + "/bus/pci/devices/" + bdf + "/numa_node", "0\n");
    }
  });
  const auto& job = run.report.job;
  REQUIRE(job.ranks.size() == run.truth.rank_data.size());
  std::vector<int> remote_ranks;
  for (const auto& tr_rank : run.truth.rank_data) {
    const RankResult* r = nullptr;
    for (const auto& rr : job.ranks)
      if (rr.pid == static_cast<uint32_t>(tr_rank.pid)) r = &rr;
    REQUIRE(r != nullptr);
    INFO("truth rank " << tr_rank.rank << " (tracer rank " << r->rank << "), device " << r->numa.device);
    CHECK(r->numa.device == tr_rank.rank);  // neuronN is rank N's (--accel-dev order)
    CHECK(r->numa.device_node == 0);
    uint64_t on = 0, remote = 0;
    for (const auto& st : r->steps)
      if (st.index >= job.skipped_warmup_steps) on += st.on_cpu_ns, remote += st.remote_node_ns;
    REQUIRE(on > 0);
    const double share = static_cast<double>(remote) / static_cast<double>(on);
    INFO("remote share of the main thread's CPU time " << share);
    if (tr_rank.rank == 0) CHECK(share < 0.05);
    else CHECK(share > 0.95);
    if (share > 0.5) remote_ranks.push_back(r->rank);
  }
  const StealFinding* f = nullptr;
  for (const auto& x : job.host_steals.findings)
    if (x.cause == StealCause::numa_remote) f = &x;
  REQUIRE(f != nullptr);
  CHECK(f->ranks == remote_ranks);
  CHECK(job.verdict.recommendation.find("numactl") != std::string::npos);
}
