// SPDX-License-Identifier: Apache-2.0
// [root] Step reconstruction from the explicit marker, and the runtime
// library discovery that lets `run` probe before the job's first call.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "export/profile_view.h"
#include "session/session.h"
#include "support/workload.h"

using namespace steptrace;

TEST_CASE("steps: the step marker cuts exact steps, time splits into on-CPU and sleep", "[root][steps]") {
  test::require_root();
  Options o;
  o.command = CommandKind::run;
  o.subsystems = *parse_subsystems("all");
  constexpr int kSteps = 12;
  o.argv = {MARKER_DEMO, std::to_string(kSteps), "20", "10"};  // 20 ms sleep + 10 ms spin per step
  auto s = Session::start(o);
  REQUIRE(s.ok());
  REQUIRE((*s)->run_loop(nullptr).ok());
  auto r = (*s)->finish();
  REQUIRE(r.ok());
  CHECK(r->job_exit_code == 0);
  REQUIRE(r->job.ranks.size() == 1);
  const auto& rank = r->job.ranks[0];
  CHECK(rank.source == StepSource::marker);
  REQUIRE(rank.steps.size() == kSteps);  // the first call is not missed, the closing call opens no step
  for (const auto& st : rank.steps) {
    if (st.index == 0) continue;
    double dur = static_cast<double>(st.duration()) / 1e6;
    CHECK(dur > 29.0);
    // 20 ms asleep shows as other (no known waker); the 10 ms spin (wall
    // clock, whole ms) as host overhead while on a CPU and as contention
    // while preempted. The wake-up from the sleep waits for a CPU too: on a
    // busy machine that is contention, not sleep, so only the on-CPU part has
    // an upper bound here (CI once saw 14-24 ms of host + contention right
    // after heavy tests; on a quiet machine the sum is ~10 ms).
    double other = static_cast<double>(st.ns[static_cast<size_t>(Category::other)]) / 1e6;
    double host = static_cast<double>(st.ns[static_cast<size_t>(Category::host_overhead)]) / 1e6;
    double cpu = host + static_cast<double>(st.ns[static_cast<size_t>(Category::cpu_contention)]) / 1e6;
    INFO("step " << st.index << ": " << dur << " ms, other " << other << ", host " << host << ", host+contention " << cpu);
    CHECK(other == Approx(20.0).margin(3.0));
    CHECK(host <= 11.5);
    CHECK(host >= 2.0);
    CHECK(cpu >= 9.5);
    CHECK(cpu <= dur - other + 0.5);
    // A step is 30 ms of work; what a busy machine adds (CI saw a 123 ms
    // step while builds ran beside it) is time waiting for a CPU, and says so.
    double contention = cpu - host;
    CHECK(dur - contention < 45.0);
  }
}

// A Python job imports for seconds before it loads its runtime with dlopen:
// the maps scans that follow its exec have given up by then (5 s). Its first
// device call sends its maps to be scanned again, and the library is probed.
TEST_CASE("steps: a library loaded by dlopen long after exec is probed at the first device call", "[root][steps]") {
  test::require_root();
  char dev[] = "/tmp/st-late-dev-XXXXXX";
  int dfd = ::mkstemp(dev);
  REQUIRE(dfd >= 0);
  ::close(dfd);
  const char* script =
      "import ctypes, fcntl, os, sys, time\n"
      "time.sleep(6.5)\n"  // past the exec's 5 s of scans
      "lib = ctypes.CDLL(sys.argv[1])\n"
      "fd = os.open(sys.argv[2], os.O_RDONLY)\n"
      "try:\n"
      "    fcntl.ioctl(fd, 0x80084e23, bytes(8))\n"  // DMA_QUEUE_COPY_START: ENOTTY on a file, still traced
      "except OSError:\n"
      "    pass\n"
      "time.sleep(1.0)\n"  // the call is drained and the maps read
      "for i in range(9):\n"
      "    lib.steptrace_step(ctypes.c_uint64(i))\n"
      "    time.sleep(0.02)\n";
  Options o;
  o.command = CommandKind::run;
  o.subsystems = *parse_subsystems("sched,accel,uprobe");
  o.accel_devs = {dev};
  o.argv = {"python3", "-c", script, MARKER_LIB, dev};
  auto s = Session::start(o);
  REQUIRE(s.ok());
  REQUIRE((*s)->run_loop(nullptr).ok());
  auto r = (*s)->finish();
  ::unlink(dev);
  REQUIRE(r.ok());
  CHECK(r->job_exit_code == 0);
  REQUIRE(r->job.ranks.size() == 1);
  CHECK(r->job.ranks[0].source == StepSource::marker);
  CHECK(r->job.ranks[0].steps.size() >= 7);
}

TEST_CASE("steps: a dynamically linked job's marker library is resolved before it runs", "[steps]") {
  auto libs = resolve_needed_libs(MARKER_DEMO);
  REQUIRE(libs.size() == 1);
  CHECK(libs[0].find("libsteptrace_marker.so") != std::string::npos);
  CHECK(resolve_needed_libs("/bin/sh").empty());              // no libnrt/marker
  CHECK(resolve_needed_libs("/nonexistent/program").empty());
}

TEST_CASE("steps: runtime libraries are found in /proc/PID/maps text", "[steps]") {
  std::string maps =
      "7f0000-7f1000 r-xp 00000000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n"
      "7f1000-7f2000 r--p 00001000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n"
      "7f2000-7f3000 r-xp 00000000 fd:01 124 /usr/lib/libsteptrace_marker.so\n"
      "7f3000-7f4000 r-xp 00000000 fd:01 125 /usr/lib/libnrtx.so (deleted)\n"
      "7f4000-7f5000 r-xp 00000000 fd:01 126 /usr/lib/libc.so.6\n"
      "7f5000-7f6000 rw-p 00000000 00:00 0 [heap]\n";
  auto libs = find_probe_libs(maps);
  REQUIRE(libs.size() == 2);
  CHECK(libs[0] == "/opt/aws/neuron/lib/libnrt.so.1");
  CHECK(libs[1] == "/usr/lib/libsteptrace_marker.so");
}

// CPU-only PyTorch DDP jobs (gloo over loopback TCP, DataLoader worker
// processes reading files), with no marker and no accelerator: steptrace
// must cut them into their steps on its own and split each step as the job's
// own timers do. The job records per rank (CLOCK_MONOTONIC) each step's
// bounds, its wait for the batch and its all-reduce (a DDP comm hook: from
// the hand-over of a bucket to its completion). Needs Debian's python3-torch
// (tools/setup-deps.sh installs it).
namespace {

struct DdpShape {
  std::vector<std::string> job_args;  // ddp_train.py's, after --out and --steps
  std::string link_rate;              // run in a network namespace whose loopback is limited to this (tc tbf)
  int steps = 20;
};

struct DdpRun {
  std::string out;
  SessionReport report;
  std::vector<nlohmann::json> truth;        // by the job's own rank
  std::vector<const RankResult*> traced;    // the traced rank of each job rank
  ~DdpRun() {
    std::error_code ec;
    std::filesystem::remove_all(out, ec);
  }
};

void run_ddp(const DdpShape& shape, DdpRun& run) {
  test::require_root();
  char tmpl[] = "/tmp/st-ddp.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  run.out = tmpl;
  std::vector<std::string> job = {"/usr/bin/python3", DDP_SCRIPT, "--out", run.out, "--steps",
                                  std::to_string(shape.steps)};
  job.insert(job.end(), shape.job_args.begin(), shape.job_args.end());
  Options o;
  o.command = CommandKind::run;
  o.subsystems = *parse_subsystems("all");
  if (shape.link_rate.empty()) {
    o.argv = job;
  } else {
    // Its own network namespace: the rate limit holds for this job alone. A
    // 9000-byte MTU and a 256 KiB bucket: a loopback packet (64 KiB by
    // default) larger than the bucket would never pass.
    std::string cmd = "ip link set lo mtu 9000 up && tc qdisc add dev lo root tbf rate " + shape.link_rate +
                      " burst 256kb latency 200ms && exec";
    for (const auto& a : job) cmd += " '" + a + "'";
    o.argv = {"/usr/bin/unshare", "-n", "/bin/sh", "-c", cmd};
  }
  o.duration_s = 240;
  // Fold every second, so windows end in the set-up traffic, mid-training and
  // in the shutdown: the steps must not depend on where they fall (a CI run
  // that took 10.6 s folded once, at the default 10 s, and found 22 steps).
  o.window_s = 1;
  auto s = Session::start(o);
  REQUIRE(s.ok());
  REQUIRE((*s)->run_loop(nullptr).ok());
  auto r = (*s)->finish();
  REQUIRE(r.ok());
  run.report = std::move(*r);
  REQUIRE(run.report.job_exit_code == 0);  // python3-torch (or tc) missing fails here, loudly
  CHECK_FALSE(run.report.incomplete());
  REQUIRE(run.report.job.ranks.size() == 2);
  // Windows close every second; whether one folds is not asserted: a CPU-only
  // rank folds only once its steps agree (a learned burst pattern, or 64
  // steps; step_ledger.cpp), and 20 short steps may all fall before that (CI:
  // 0 folds in one 8 s run, every other check passing). Folding is asserted
  // by the three-minute accuracy tests.
  CHECK(run.report.windows.fold_every_ns == 1'000'000'000ull);
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(run.out + "/rank" + std::to_string(rank) + ".json");
    REQUIRE(in.good());
    run.truth.push_back(nlohmann::json::parse(in));
    const RankResult* rr = nullptr;
    for (const auto& x : run.report.job.ranks)
      if (static_cast<int>(x.pid) == run.truth.back()["pid"].get<int>()) rr = &x;
    INFO("rank " << rank);
    REQUIRE(rr != nullptr);
    run.traced.push_back(rr);
  }
}

// Every step on every rank, where the job saw it, and each step's collective
// and data-loading shares within 3 pp of the job's own timers (means over the
// steps after the first, which waits for the loader workers to start).
void check_ddp_steps(const DdpRun& run, int steps) {
  for (int rank = 0; rank < 2; ++rank) {
    const RankResult& rr = *run.traced[static_cast<size_t>(rank)];
    const auto& ts = run.truth[static_cast<size_t>(rank)]["steps"];
    INFO("rank " << rank);
    CHECK(rr.source == StepSource::automatic_host);
    CHECK(rr.loader_pids.size() == 2);  // the DataLoader's worker processes
    REQUIRE(ts.size() == static_cast<size_t>(steps));
    REQUIRE(rr.steps.size() == static_cast<size_t>(steps));
    int close = 0;
    double dur_err = 0, coll_truth = 0, coll_traced = 0, data_truth = 0, data_wait_truth = 0, data_traced = 0;
    double delay_truth = 0, contention_traced = 0;
    for (int k = 1; k < steps; ++k) {
      const auto& t = ts[static_cast<size_t>(k)];
      const auto& st = rr.steps[static_cast<size_t>(k)];
      int64_t t0 = t["start_ns"].get<int64_t>(), t1 = t["end_ns"].get<int64_t>();
      // Within 10 ms, or 8 % of the step on a loaded machine (the Python
      // between the job's own timestamp and its wait for the batch stretches).
      int64_t off = static_cast<int64_t>(st.start_ns) - t0;
      int64_t tol = std::max<int64_t>(10'000'000, (t1 - t0) * 8 / 100);
      close += off > -tol && off < tol;
      // Step 1's start, the end of the warm-up step, was placed late in some
      // runs (+21 to +23 ms in 3 of 10, +367 ms in one): DDP broadcasts its
      // rebuilt bucket order early in the second iteration, and that small
      // burst could be grouped with step 0's all-reduce (seen: +10 and +12
      // ms in a recorded run analysed in 1 s windows). Fixed in
      // steps/step_builder.cpp; step 1 counts again.
      dur_err += std::abs(static_cast<double>(st.duration()) - static_cast<double>(t1 - t0)) / static_cast<double>(t1 - t0);
      const double tdur = static_cast<double>(t1 - t0), sdur = static_cast<double>(st.duration());
      coll_truth += static_cast<double>(t["coll_ns"].get<int64_t>()) / tdur;
      data_truth += static_cast<double>(t["data_ns"].get<int64_t>()) / tdur;
      // Off the CPU and not waiting for one: blocked, for the loaders.
      data_wait_truth += static_cast<double>(t["data_ns"].get<int64_t>() - t["data_cpu_ns"].get<int64_t>() -
                                             t["data_delay_ns"].get<int64_t>()) / tdur;
      coll_traced += static_cast<double>(st.ns[static_cast<size_t>(Category::collective)]) / sdur;
      data_traced += static_cast<double>(st.ns[static_cast<size_t>(Category::data_loading)]) / sdur;
      delay_truth += static_cast<double>(t["run_delay_ns"].get<int64_t>()) / tdur;
      contention_traced += static_cast<double>(st.ns[static_cast<size_t>(Category::cpu_contention)]) / sdur;
    }
    const double n = steps - 1, n_dur = steps - 1;
    std::printf("ddp rank %d: %d/%d step starts within max(10 ms, 8%%) of the job's own, mean duration error %.1f%% (steps 1-%d)\n",
                rank, close, steps - 1, 100 * dur_err / n_dur, steps - 1);
    std::printf("ddp rank %d: collective %.1f%% by the job's timers, %.1f%% traced; data %.1f%% (%.1f%% blocked) / %.1f%%; "
                "runqueue wait %.1f%% by schedstat, cpu_contention %.1f%% traced\n",
                rank, 100 * coll_truth / n, 100 * coll_traced / n, 100 * data_truth / n, 100 * data_wait_truth / n,
                100 * data_traced / n, 100 * delay_truth / n, 100 * contention_traced / n);
    // Where the steps were cut and what each held, against the job's.
    if (close < steps - 1 || dur_err / n_dur >= 0.03 || std::abs(coll_traced - coll_truth) / n >= 0.01)
      for (int k = 1; k < steps; ++k) {
        const auto& t = ts[static_cast<size_t>(k)];
        const auto& st = rr.steps[static_cast<size_t>(k)];
        const int64_t t0 = t["start_ns"].get<int64_t>(), t1 = t["end_ns"].get<int64_t>();
        std::printf("ddp rank %d step %d: traced start %+.1f ms, %.1f ms long (the job's %.1f ms, data %.1f ms); "
                    "collective %.1f ms traced, %.1f ms timed (forward %.1f, backward %.1f)\n",
                    rank, k, static_cast<double>(static_cast<int64_t>(st.start_ns) - t0) / 1e6,
                    static_cast<double>(st.duration()) / 1e6, static_cast<double>(t1 - t0) / 1e6,
                    static_cast<double>(t["data_ns"].get<int64_t>()) / 1e6,
                    static_cast<double>(st.ns[static_cast<size_t>(Category::collective)]) / 1e6,
                    static_cast<double>(t["coll_ns"].get<int64_t>()) / 1e6,
                    static_cast<double>(t.value("fwd_ns", int64_t{0})) / 1e6,
                    static_cast<double>(t.value("bwd_ns", int64_t{0})) / 1e6);
      }
    CHECK(close >= steps - 3);
    CHECK(dur_err / n_dur < 0.05);
    CHECK(100 * coll_traced / n == Approx(100 * coll_truth / n).margin(3.0));
    // Data loading: the job's timer is the whole next(it), which includes the
    // main thread's own CPU around the wait (the DataLoader's bookkeeping,
    // unpickling the batch and mapping its shared-memory tensors). The kernel
    // sees that as the main thread running: host time, not a wait for the
    // loaders. So the tracer's share never exceeds the job's timer (3 pp
    // above at most), and is at least the part of it the main thread spent
    // blocked (the job's timer less its thread CPU time and less its
    // runqueue wait by schedstat, which is cpu_contention to the tracer),
    // less 3 pp or 15 % of it. (With loaders ahead, next(it) is mostly CPU:
    // one run here had 3.2 % by the job's timer against 0.1 % traced. A CI
    // run that counted the runqueue wait as blocked had 3.8 % "off its CPU"
    // against 0.65 % traced.)
    const double data_job = 100 * data_truth / n, data_wait = 100 * data_wait_truth / n,
                 data_seen = 100 * data_traced / n;
    INFO("data loading: job " << data_job << " % (" << data_wait << " % blocked), traced " << data_seen << " %");
    CHECK(data_seen <= data_job + 3.0);
    CHECK(data_seen >= data_wait - std::max(3.0, 0.15 * data_wait));
    // Step 0 waits for the loader workers to start: its data loading is the
    // job's own wait in its first next(it), within 5 % (30 ms at least). Not
    // its gating category: the traced step 0 also holds the rank's start-up
    // before the loop (spawn, import torch, init_process_group), which the
    // job's timer does not. A CI run under load had rank 1's step 0 gated by
    // "other": its wait to connect to rank 0's store, which retries each
    // second (1000 ms of "other" in 2 of 10 runs here).
    const auto& s0 = rr.steps[0];
    const auto& t0 = ts[0];
    const double s0_data = static_cast<double>(s0.ns[static_cast<size_t>(Category::data_loading)]) / 1e6;
    const double t0_data = static_cast<double>(t0["data_ns"].get<int64_t>()) / 1e6;
    const double t0_blocked = t0_data - static_cast<double>(t0["data_cpu_ns"].get<int64_t>() +
                                                            t0["data_delay_ns"].get<int64_t>()) / 1e6;
    std::ostringstream why;
    why << "step 0: " << static_cast<double>(s0.duration()) / 1e6 << " ms traced";
    for (size_t c = 0; c < kCategories; ++c) why << ", " << kCategoryNames[c] << " " << static_cast<double>(s0.ns[c]) / 1e6;
    why << "; the job's: " << static_cast<double>(t0["end_ns"].get<int64_t>() - t0["start_ns"].get<int64_t>()) / 1e6
        << " ms, data " << t0_data << " (" << t0_blocked << " blocked)";
    INFO(why.str());
    std::printf("ddp rank %d %s\n", rank, why.str().c_str());
    CHECK(s0_data <= t0_data + std::max(30.0, 0.05 * t0_data));
    CHECK(s0_data >= t0_blocked - std::max(30.0, 0.05 * t0_blocked));
  }
}

// Two ranks running the same loop: no straggler, unless one holds the other
// back. On 2 vCPUs shared by two ranks, four loaders and gloo's threads one
// rank does fall behind in some runs (rank 1 waited 33.6 % of the step in the
// all-reduce, rank 0 17.7 %, and rank 0 was named), and naming it then is
// right. steptrace names a rank only when its peer spends 5 pp more of its
// step in the collective than it does (kMinPeersWait, by the traced shares);
// each traced share is within 3 pp of the job's timer (check_ddp_steps), so
// the timers must at least agree that the named rank waited less. A 5 pp rule
// on the timers themselves failed where the traces read 37.9 % and 32.2 %
// and the timers 35.2 % and 32.1 %.
void check_symmetric_straggler(const DdpRun& run, int steps) {
  const int named = run.report.job.verdict.straggler_rank;
  INFO("straggler named: rank " << named << "; " << run.report.job.verdict.headline);
  // What the verdict weighed: each rank's steps in which it held the other back, and by how much.
  for (const auto& r : run.report.job.ranks) {
    uint64_t late_ns = 0;
    for (const auto& st : r.steps)
      if (st.straggler && st.index >= run.report.job.skipped_warmup_steps) late_ns += st.late_ns;
    std::printf("ddp rank %d: last at the collective in %d of %d counted steps, %.1f ms held back\n", r.rank,
                static_cast<int>(r.straggler_steps), static_cast<int>(r.counted_steps), static_cast<double>(late_ns) / 1e6);
  }
  if (named == -1) return;
  double coll[2] = {0, 0};
  for (int rank = 0; rank < 2; ++rank) {
    const auto& ts = run.truth[static_cast<size_t>(rank)]["steps"];
    for (int k = 1; k < steps; ++k) {
      const auto& t = ts[static_cast<size_t>(k)];
      coll[rank] += 100.0 * static_cast<double>(t["coll_ns"].get<int64_t>()) /
                    static_cast<double>(t["end_ns"].get<int64_t>() - t["start_ns"].get<int64_t>()) / (steps - 1);
    }
  }
  const int late = run.traced[0]->rank == named ? 0 : 1;
  REQUIRE(run.traced[static_cast<size_t>(late)]->rank == named);
  INFO("collective by the job's timers: rank 0 " << coll[0] << " %, rank 1 " << coll[1] << " %");
  CHECK(coll[1 - late] - coll[late] > 0.0);
  auto traced = [&](int rank) {
    for (const auto& r : run.report.job.ranks)
      if (r.rank == rank) {
        uint64_t all = 0;
        for (uint64_t ns : r.total) all += ns;
        return all ? 100.0 * static_cast<double>(r.total[static_cast<size_t>(Category::collective)]) / static_cast<double>(all) : 0.0;
      }
    return 0.0;
  };
  const int other = run.traced[static_cast<size_t>(1 - late)]->rank;
  INFO("collective traced: named rank " << traced(named) << " %, its peer " << traced(other) << " %");
  CHECK(traced(other) - traced(named) >= 5.0);
}

}  // namespace

TEST_CASE("steps: a CPU-only PyTorch DDP job is cut into its steps with no configuration", "[root][steps]") {
  DdpRun run;
  run_ddp({}, run);
  check_ddp_steps(run, 20);
  check_symmetric_straggler(run, 20);
  // The socket evidence names a gradient socket (gloo's, off the main
  // thread), not the rendezvous store's, and it moved real bytes per step.
  bool socket_line = false;
  for (const auto& e : run.report.job.verdict.evidence) {
    if (e.find("busiest socket") == std::string::npos) continue;
    socket_line = true;
    INFO(e);
    double mib = -1;
    auto at = e.find("carried ");
    if (at != std::string::npos) mib = std::atof(e.c_str() + at + 8);
    CHECK(mib > 0.05);  // the model's gradients, several times over per step
  }
  CHECK(socket_line);
}

// Large batches: the backward pass overlaps most of the all-reduce, which
// the job's hook times as collective while the main thread computes. The
// loaders decode each sample for 0.25 ms of CPU: ~0.8 s of CPU in
// FileDataset.__getitem__ over the run, ~38 samples at 49 Hz. Without it
// their only work there was reading the file (~40 us), 1-4 samples a run,
// and CI once saw none: the loaders' samples were their start-up (importing
// torch in each spawned worker).
TEST_CASE("steps: a compute-heavy PyTorch DDP job splits as its own timers do", "[root][steps]") {
  DdpRun run;
  run_ddp({{"--batch", "128", "--decode-ms", "0.25"}, "", 12}, run);
  check_ddp_steps(run, 12);
  check_symmetric_straggler(run, 12);
  // Host compute (or, on a busy machine, waiting for a CPU to compute on)
  // is the step.
  const auto& share = run.report.job.mean_share;
  CHECK(share[static_cast<size_t>(Category::host_overhead)] + share[static_cast<size_t>(Category::cpu_contention)] > 0.7);
  CHECK((run.report.job.verdict.category == Category::host_overhead ||
         run.report.job.verdict.category == Category::cpu_contention));
  // In which code: Debian's python3 (no frame pointers) still shows its
  // Python frames - the job's own script, by function and file - in the main
  // threads' host time and in the DataLoader workers' time.
  const auto stacks = named_stacks(run.report);
  INFO(profile_text(run.report, stacks));
  auto share_with = [&](Category c, SampleRole role, const std::string& fn) {
    uint64_t with = 0, all = 0;
    for (const auto& st : stacks) {
      if (st.category != c || st.role != role) continue;
      all += st.samples;
      for (const auto& f : st.frames)
        if (f.rfind(fn + " (", 0) == 0 && f.find("ddp_train.py:") != std::string::npos) {
          with += st.samples;
          break;
        }
    }
    return std::make_pair(with, all);
  };
  const auto [main_with, main_all] = share_with(Category::host_overhead, SampleRole::main, "run_rank");
  INFO("host_overhead samples of the main threads: " << main_all << ", with run_rank (ddp_train.py) " << main_with);
  CHECK(main_all >= 50);
  CHECK(main_with * 2 > main_all);
  const auto [load_with, load_all] = share_with(Category::data_loading, SampleRole::loader, "FileDataset.__getitem__");
  INFO("loader samples: " << load_all << ", in FileDataset.__getitem__ " << load_with);
  CHECK(load_with >= 10);
}

// Both ranks alike, the all-reduce paced by a 50 Mbit/s link: collective-bound,
// and nobody is late (the ranks' steps end at different phases of one
// all-reduce; that is not a straggler).
TEST_CASE("steps: a link-limited PyTorch DDP job is collective-bound with no straggler", "[root][steps]") {
  DdpRun run;
  run_ddp({{"--hidden", "256"}, "50mbit", 20}, run);
  check_ddp_steps(run, 20);
  const auto& v = run.report.job.verdict;
  INFO(v.headline);
  CHECK(v.straggler_rank == -1);
  CHECK(v.category == Category::collective);
  CHECK(v.headline.find("CPU-only job") == 0);
}

// Rank 1's storage is slow (30 ms more per sample: a batch every 240 ms from
// its two workers): its main thread waits for batches, rank 0 waits for it in
// the all-reduce. The verdict names rank 1 and data loading, and its advice is
// about rank 1's loaders. At 20 ms the plant did not always take (one run:
// rank 1 waited 8 % for data, the ranks' collective waits alike, nobody
// late). At 40 ms (steps of 320 ms) rank 0's gloo workers, waiting 300 ms for
// rank 1 every other step, were once not recognised as workers in a later
// window (steps/collective_in_flight.cpp) and its collective came out 4-6 pp
// short; recorded runs at 20, 30 and 40 ms now all replay within 0.5 pp.
TEST_CASE("steps: a PyTorch DDP job with slow storage on one rank names that rank and its cause", "[root][steps]") {
  DdpRun run;
  run_ddp({{"--slow-rank", "1", "--slow-ms", "30"}, "", 20}, run);
  check_ddp_steps(run, 20);
  const auto& v = run.report.job.verdict;
  INFO(v.headline);
  CHECK(v.straggler_rank == run.traced[1]->rank);
  CHECK(v.straggler_cause == Category::data_loading);
  CHECK(v.headline.find("rank " + std::to_string(run.traced[1]->rank) + " holds the collective back") !=
        std::string::npos);
  CHECK(v.recommendation.find("feed rank " + std::to_string(run.traced[1]->rank) + " faster") == 0);
}
