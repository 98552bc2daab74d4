// SPDX-License-Identifier: Apache-2.0
// The steps stage on hand-built timelines, one test per step source: runtime
// probes (nrt_execute), the step marker, accelerator queue-kick bursts, and
// a CPU-only job's collective traffic bursts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <map>

#include "attribution/job_analysis.h"
#include "decode/neuron_cmd.h"
#include "decode/syscalls.h"
#include "steps/anchors.h"
#include "steps/rank_steps.h"
#include "steps/step_builder.h"
#include "steps_events.h"

using namespace steptrace;
using namespace steptrace::test;

namespace {

bool contains(const std::vector<uint32_t>& v, uint32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Step k of a rank with a loader thread: at base_k the main thread waits for
// a batch (woken by the loader 3 ms later), then executes [base+5, base+15).
constexpr uint32_t kRankPid = 1000, kLoaderTid = 1001;
uint64_t probe_base(int k) { return 100 * kMs + static_cast<uint64_t>(k) * 20 * kMs; }

void feed_probe_job(Feed& f, int steps) {
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
  for (int k = 0; k < steps; ++k) {
    const uint64_t b = probe_base(k);
    f(switch_out(kRankPid, kRankPid, b));                            // waits for a batch
    f(wakeup(kRankPid, kRankPid, b + 3 * kMs, kRankPid, kLoaderTid));  // the loader hands it over
    f(switch_in(kRankPid, kRankPid, b + 3 * kMs));
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
  }
  f.finish(250 * kMs);
}

}  // namespace

TEST_CASE("steps: runtime probes - one step per nrt_execute, opened at the wait for the loader", "[steps][unit]") {
  Feed f;
  feed_probe_job(f, 5);
  auto ranks = steps::reconstruct_steps(f.tl, f.tt);
  REQUIRE(ranks.size() == 1);
  const auto& r = ranks[0];
  CHECK(r.pid == kRankPid);
  CHECK(r.main_tid == kRankPid);
  CHECK(r.source == StepSource::runtime_probes);
  CHECK(contains(r.loader_tids, kLoaderTid));
  REQUIRE(r.anchors.size() == 5);
  CHECK(r.anchors[2].start == probe_base(2) + 5 * kMs);
  CHECK(r.anchors[2].end == probe_base(2) + 15 * kMs);
  REQUIRE(r.steps.size() == 5);
  for (size_t k = 0; k < r.steps.size(); ++k) {
    INFO("step " << k);
    CHECK(r.steps[k].start_ns == probe_base(static_cast<int>(k)));
  }
  for (size_t k = 0; k + 1 < r.steps.size(); ++k) CHECK(r.steps[k].end_ns == r.steps[k + 1].start_ns);
  // The last step ends a typical tail (5 ms) after its execution.
  CHECK(r.steps.back().end_ns == probe_base(4) + 20 * kMs);
}

TEST_CASE("steps: step 0 opens after the runtime's set-up, not at the loaders' start-up handshake", "[steps][unit]") {
  // The job waits for its loaders to start (woken by one), then loads the
  // model (set-up ioctls: memory allocation), then waits for its first batch.
  // The handshake is close enough to the first execution to fall in the
  // window step 0 is searched in; the set-up between them must stay out of
  // step 0 (a CI run counted the EFA endpoint's set-up calls inside it).
  Feed f;
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
  f(switch_out(kRankPid, kRankPid, 72 * kMs));                            // waits for the loaders' hello
  f(wakeup(kRankPid, kRankPid, 74 * kMs, kRankPid, kLoaderTid));
  f(switch_in(kRankPid, kRankPid, 74 * kMs));
  f(ioctl(kRankPid, kRankPid, 80 * kMs, 81 * kMs, NEURON_CMD_MEM_ALLOC_V2MT64));  // nrt_load
  f(ioctl(kRankPid, kRankPid, 90 * kMs, 91 * kMs, NEURON_CMD_MEM_ALLOC_V2MT64));  // tensor allocation
  for (int k = 0; k < 5; ++k) {
    const uint64_t b = probe_base(k);
    f(switch_out(kRankPid, kRankPid, b));
    f(wakeup(kRankPid, kRankPid, b + 3 * kMs, kRankPid, kLoaderTid));
    f(switch_in(kRankPid, kRankPid, b + 3 * kMs));
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs, ST_UP_NRT_EXECUTE, false));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs, ST_UP_NRT_EXECUTE, true));
  }
  f.finish(250 * kMs);
  auto ranks = steps::reconstruct_steps(f.tl, f.tt);
  REQUIRE(ranks.size() == 1);
  REQUIRE(ranks[0].steps.size() == 5);
  CHECK(ranks[0].steps[0].start_ns == probe_base(0));  // the wait for the first batch, after the set-up
  CHECK(ranks[0].steps[1].start_ns == probe_base(1));
}

TEST_CASE("attribution: a wait woken by a loader is data loading, nrt_execute is device execute", "[steps][unit]") {
  Feed f;
  feed_probe_job(f, 5);
  DropStats drops;
  JobAnalysis job = analyze_job(f.tl, f.tt, drops);
  REQUIRE(job.ranks.size() == 1);
  REQUIRE(job.ranks[0].steps.size() == 5);
  const auto& st = job.ranks[0].steps[2];
  CHECK(st.ns[static_cast<size_t>(Category::data_loading)] == 3 * kMs);
  CHECK(st.ns[static_cast<size_t>(Category::device_execute)] == 10 * kMs);
  CHECK(st.ns[static_cast<size_t>(Category::host_overhead)] == 7 * kMs);
  CHECK(st.gating == Category::device_execute);
  CHECK(job.verdict.category == Category::device_execute);
}

TEST_CASE("steps: the marker opens a step at each steptrace_step() call", "[steps][unit]") {
  const uint32_t pid = 3000;
  auto run = [&](uint64_t thread_end) {
    Feed f;
    f(switch_in(pid, pid, 90 * kMs));
    for (int k = 0; k < 4; ++k)
      f(uprobe(pid, pid, 100 * kMs + static_cast<uint64_t>(k) * 20 * kMs, ST_UP_STEP_MARKER, false));
    f.finish(thread_end);
    return steps::reconstruct_steps(f.tl, f.tt);
  };
  SECTION("the thread works on after the last marker: that time is a step, clamped to the thread's end") {
    auto ranks = run(175 * kMs);
    REQUIRE(ranks.size() == 1);
    CHECK(ranks[0].source == StepSource::marker);
    CHECK(ranks[0].anchors.empty());
    REQUIRE(ranks[0].steps.size() == 4);
    CHECK(ranks[0].steps[0].start_ns == 100 * kMs);
    CHECK(ranks[0].steps[1].start_ns == 120 * kMs);
    CHECK(ranks[0].steps[3].start_ns == 160 * kMs);
    CHECK(ranks[0].steps[3].end_ns == 175 * kMs);
  }
  SECTION("a final marker that closes the loop opens nothing") {
    auto ranks = run(165 * kMs);
    REQUIRE(ranks.size() == 1);
    REQUIRE(ranks[0].steps.size() == 3);
    CHECK(ranks[0].steps.back().end_ns == 160 * kMs);
  }
}

TEST_CASE("steps: queue-kick bursts stand in for executions when no runtime probe fired", "[steps][unit]") {
  const uint32_t pid = 4000;
  Feed f;
  f(switch_in(pid, pid, 90 * kMs));
  for (int k = 0; k < 4; ++k) {
    const uint64_t b = 100 * kMs + static_cast<uint64_t>(k) * 20 * kMs;
    f(ioctl(pid, pid, b, b + kMs / 10, NEURON_CMD_DMA_QUEUE_COPY_START));
    f(ioctl(pid, pid, b + kMs / 5, b + 3 * kMs / 10, NEURON_CMD_DMA_QUEUE_COPY_START));
    if (k == 3)  // no acknowledgement: the next other ioctl ends the execution
      f(ioctl(pid, pid, b + 6 * kMs, b + 6 * kMs + kMs / 10, NEURON_CMD_MEM_ALLOC));
    else
      f(ioctl(pid, pid, b + 8 * kMs, b + 8 * kMs + kMs / 10, NEURON_CMD_DMA_ACK_COMPLETED));
  }
  f.finish(200 * kMs);
  const ThreadTimeline* main = f.tl.find(pid);
  REQUIRE(main != nullptr);
  auto anchors = steps::anchors_from_ioctls(*main);
  REQUIRE(anchors.size() == 4);
  CHECK(anchors[0].start == 100 * kMs);
  CHECK(anchors[0].end == 108 * kMs + kMs / 10);  // through the acknowledgement
  CHECK(anchors[3].start == 160 * kMs);
  CHECK(anchors[3].end == 166 * kMs);             // up to the start of the next ioctl

  auto ranks = steps::reconstruct_steps(f.tl, f.tt);
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0].source == StepSource::automatic);
  CHECK(ranks[0].anchors.size() == 4);
  REQUIRE(ranks[0].steps.size() == 4);
  // No loader and no input copy: each step opens at its execution.
  CHECK(ranks[0].steps[1].start_ns == 120 * kMs);
  CHECK(ranks[0].steps[2].start_ns == 140 * kMs);
}

namespace {

// A CPU-only data-parallel rank: main thread 2000, a communication thread
// 2001 that all-reduces 3 x 1 MiB once per step, a DataLoader worker process
// 2100 that hands the main thread its batch at the start of each step.
constexpr uint32_t kCpuPid = 2000, kCommTid = 2001, kWorkerPid = 2100;
uint64_t host_base(int k) { return 100 * kMs + static_cast<uint64_t>(k) * 50 * kMs; }

void feed_cpu_job(Feed& f, int steps) {
  f(switch_in(kCpuPid, kCpuPid, 40 * kMs));
  f(switch_in(kCpuPid, kCommTid, 40 * kMs));
  f(fork_process(kCpuPid, kWorkerPid, 45 * kMs));
  // Setup traffic (rendezvous) before the first batch: not a step.
  f(send(kCpuPid, kCommTid, 60 * kMs, kMs / 10, 100));
  f(send(kCpuPid, kCommTid, 61 * kMs, kMs / 10, 100));
  for (int k = 0; k < steps; ++k) {
    const uint64_t b = host_base(k);
    f(switch_out(kCpuPid, kCpuPid, b));
    f(wakeup(kCpuPid, kCpuPid, b + 5 * kMs, kWorkerPid, kWorkerPid));
    f(switch_in(kCpuPid, kCpuPid, b + 5 * kMs));
    for (int i = 0; i < 3; ++i) f(send(kCpuPid, kCommTid, b + (21 + static_cast<uint64_t>(i)) * kMs, kMs / 2, 1 << 20));
  }
  f.finish(host_base(steps) + 10 * kMs);
}

}  // namespace

TEST_CASE("steps: a CPU-only job is cut at its collective's traffic bursts", "[steps][unit]") {
  Feed f;
  feed_cpu_job(f, 5);
  auto ranks = steps::reconstruct_steps(f.tl, f.tt);
  REQUIRE(ranks.size() == 1);
  const auto& r = ranks[0];
  CHECK(r.source == StepSource::automatic_host);
  CHECK(r.host_only);
  CHECK(r.comm_threads.count(kCommTid) == 1);
  CHECK(r.loader_pids == std::vector<uint32_t>{kWorkerPid});
  CHECK_FALSE(contains(r.loader_tids, kCommTid));
  // One burst per step; the setup traffic before the first batch is left out.
  REQUIRE(r.anchors.size() == 5);
  CHECK(r.anchors[0].start == host_base(0) + 20 * kMs + kMs / 2);
  CHECK(r.anchors[0].end == host_base(0) + 23 * kMs);
  REQUIRE(r.steps.size() == 5);
  for (size_t k = 0; k < r.steps.size(); ++k) {
    INFO("step " << k);
    CHECK(r.steps[k].start_ns == host_base(static_cast<int>(k)));
  }
}

TEST_CASE("steps: fewer than 8 collective calls after the first batch make no CPU-only rank", "[steps][unit]") {
  Feed f;
  feed_cpu_job(f, 2);  // 2 setup calls + 6 step calls, of which only the 6 count
  auto ranks = steps::reconstruct_steps(f.tl, f.tt);
  CHECK(ranks.empty());
}

TEST_CASE("attribution: a CPU-only job's verdict says so", "[steps][unit]") {
  Feed f;
  feed_cpu_job(f, 5);
  DropStats drops;
  JobAnalysis job = analyze_job(f.tl, f.tt, drops);
  REQUIRE(job.ranks.size() == 1);
  CHECK(job.ranks[0].source == StepSource::automatic_host);
  CHECK(job.verdict.headline.rfind("CPU-only job (no accelerator seen): ", 0) == 0);
  // The 5 ms wait for the worker's batch is data loading in every step.
  CHECK(job.ranks[0].steps[1].ns[static_cast<size_t>(Category::data_loading)] == 5 * kMs);
}

TEST_CASE("steps: set-up traffic while the main thread waits is one burst, not steps", "[steps][unit]") {
  // A window of a long session that holds only the parameter broadcast: the
  // communication thread moves 30 equal chunks 10 ms apart while the main
  // thread sleeps in the broadcast, before any loader exists. Equal bytes
  // at a steady period look like steps; the main thread never worked
  // between them, so they are one collective.
  Feed f;
  f(switch_in(kCpuPid, kCpuPid, 40 * kMs));
  f(switch_in(kCpuPid, kCommTid, 40 * kMs));
  f(switch_out(kCpuPid, kCpuPid, 45 * kMs));
  for (int i = 0; i < 30; ++i) f(send(kCpuPid, kCommTid, (50 + 10 * static_cast<uint64_t>(i)) * kMs, kMs / 2, 1 << 20));
  f.finish(400 * kMs);
  CHECK(steps::reconstruct_steps(f.tl, f.tt).empty());

  // The same traffic with the main thread working between the chunks is a
  // job stepping: 30 steps.
  Feed g;
  g(switch_in(kCpuPid, kCpuPid, 40 * kMs));
  g(switch_in(kCpuPid, kCommTid, 40 * kMs));
  for (int i = 0; i < 30; ++i) g(send(kCpuPid, kCommTid, (50 + 10 * static_cast<uint64_t>(i)) * kMs, kMs / 2, 1 << 20));
  g.finish(400 * kMs);
  auto ranks = steps::reconstruct_steps(g.tl, g.tt);
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0].anchors.size() == 30);
  CHECK(ranks[0].burst.known());  // 30 equal steps: the model is learned
  CHECK(ranks[0].burst.step_bytes == 1 << 20);
}

TEST_CASE("steps: a known burst model cuts a group of two steps back into two", "[steps][unit]") {
  // Steps of 3 x 1 MiB whose between-step gap (4 ms) came out shorter than
  // the model's split (6 ms, learned when steps were further apart).
  Feed f;
  f(switch_in(kCpuPid, kCpuPid, 40 * kMs));
  f(switch_in(kCpuPid, kCommTid, 40 * kMs));
  for (int k = 0; k < 4; ++k) {
    const uint64_t b = 50 * kMs + static_cast<uint64_t>(k) * 11 * kMs;
    for (int i = 0; i < 3; ++i) f(send(kCpuPid, kCommTid, b + 3 * static_cast<uint64_t>(i) * kMs, kMs / 2, 1 << 20));
  }
  f.finish(200 * kMs);
  std::map<uint32_t, steps::BurstModel> known{{kCpuPid, {6 * kMs, 3u << 20}}};
  auto ranks = steps::reconstruct_steps(f.tl, f.tt, known);
  REQUIRE(ranks.size() == 1);
  REQUIRE(ranks[0].anchors.size() == 4);
  for (size_t k = 0; k < 4; ++k) {
    INFO("step " << k);
    // A send recorded at ts began dur before it.
    CHECK(ranks[0].anchors[k].start == 50 * kMs + k * 11 * kMs - kMs / 2);
    CHECK(ranks[0].anchors[k].end == 50 * kMs + k * 11 * kMs + 6 * kMs);
  }
}

TEST_CASE("steps: a small burst after the batch wait opens no step late, though grouped with the last collective",
          "[steps][unit]") {
  // DDP broadcasts its rebuilt bucket order early in the second iteration's
  // forward: a few hundred bytes, 10.5 ms after the first all-reduce ended,
  // closer than the burst split (12 ms here) - so grouped with step 0's
  // collective. Step 1 began before it, at the wait for its batch.
  Feed f;
  f(switch_in(kCpuPid, kCpuPid, 40 * kMs));
  f(switch_in(kCpuPid, kCommTid, 40 * kMs));
  f(fork_process(kCpuPid, kWorkerPid, 45 * kMs));
  auto base = [](int k) { return 100 * kMs + static_cast<uint64_t>(k) * 50 * kMs; };
  for (int k = 0; k < 6; ++k) {
    const uint64_t b = base(k);
    f(switch_out(kCpuPid, kCpuPid, b));
    f(wakeup(kCpuPid, kCpuPid, b + 2 * kMs, kWorkerPid, kWorkerPid));
    f(switch_in(kCpuPid, kCpuPid, b + 2 * kMs));
    if (k == 1) f(send(kCpuPid, kCommTid, b + 4 * kMs, kMs / 10, 300));
    for (int i = 0; i < 3; ++i) f(send(kCpuPid, kCommTid, b + (41 + static_cast<uint64_t>(i)) * kMs, kMs / 2, 1 << 20));
  }
  f.finish(base(6) + 10 * kMs);
  std::map<uint32_t, steps::BurstModel> known{{kCpuPid, {12 * kMs, 3u << 20}}};
  auto ranks = steps::reconstruct_steps(f.tl, f.tt, known);
  REQUIRE(ranks.size() == 1);
  const auto& r = ranks[0];
  REQUIRE(r.anchors.size() == 6);
  CHECK(r.anchors[0].end == base(1) + 4 * kMs);       // the small burst is in step 0's group
  CHECK(r.anchors[0].bulk_end == base(0) + 43 * kMs);  // after the bulk of its bytes
  CHECK(r.anchors[1].bulk_end == 0);
  REQUIRE(r.steps.size() == 6);
  for (size_t k = 0; k < r.steps.size(); ++k) {
    INFO("step " << k);
    CHECK(r.steps[k].start_ns == base(static_cast<int>(k)));
  }
}

TEST_CASE("steps: a small burst is the next step's only where the other steps lack it", "[steps][unit]") {
  auto base = [](int k) { return 100 * kMs + static_cast<uint64_t>(k) * 50 * kMs; };
  // feed(tail_every_step, batch_ready_in_step_1)
  auto feed = [&](Feed& f, bool every, bool ready) {
    f(switch_in(kCpuPid, kCpuPid, 40 * kMs));
    f(switch_in(kCpuPid, kCommTid, 40 * kMs));
    f(fork_process(kCpuPid, kWorkerPid, 45 * kMs));
    for (int k = 0; k < 6; ++k) {
      const uint64_t b = base(k);
      if (!(ready && k == 1)) {
        f(switch_out(kCpuPid, kCpuPid, b));
        f(wakeup(kCpuPid, kCpuPid, b + 2 * kMs, kWorkerPid, kWorkerPid));
        f(switch_in(kCpuPid, kCpuPid, b + 2 * kMs));
      }
      if (k == 1 && !every) f(send(kCpuPid, kCommTid, b + 4 * kMs, kMs / 10, 300));
      // The bulk (3 x 1 MiB) ends 11 ms before the next step's small burst.
      const uint64_t at = every ? 35 : 41;
      for (int i = 0; i < 3; ++i) f(send(kCpuPid, kCommTid, b + (at + static_cast<uint64_t>(i)) * kMs, kMs / 2, 1 << 20));
      // A small last bucket after more of the main thread's backward.
      if (every) f(send(kCpuPid, kCommTid, b + 41 * kMs, kMs / 10, 300));
    }
    f.finish(base(6) + 10 * kMs);
  };
  std::map<uint32_t, steps::BurstModel> known{{kCpuPid, {12 * kMs, (3u << 20) + 300}}};
  {
    // The batch was ready in step 1: the step opens right after step 0's
    // bulk, not after the small burst of its own.
    Feed f;
    feed(f, false, true);
    auto ranks = steps::reconstruct_steps(f.tl, f.tt, known);
    REQUIRE(ranks.size() == 1);
    REQUIRE(ranks[0].steps.size() == 6);
    CHECK(ranks[0].anchors[0].end == base(1) + 4 * kMs);
    CHECK(ranks[0].anchors[0].bulk_end == base(0) + 43 * kMs);
    CHECK(ranks[0].steps[1].start_ns == base(0) + 43 * kMs);
    CHECK(ranks[0].steps[2].start_ns == base(2));
  }
  {
    // Every step all-reduces a small last bucket: it is each collective's own.
    Feed f;
    feed(f, true, false);
    auto ranks = steps::reconstruct_steps(f.tl, f.tt, known);
    REQUIRE(ranks.size() == 1);
    REQUIRE(ranks[0].steps.size() == 6);
    for (size_t k = 0; k < 6; ++k) {
      INFO("step " << k);
      CHECK(ranks[0].anchors[k].bulk_end == 0);
      CHECK(ranks[0].anchors[k].end == base(static_cast<int>(k)) + 41 * kMs);
      CHECK(ranks[0].steps[k].start_ns == base(static_cast<int>(k)));
    }
  }
}

namespace {

// The main thread leaves the CPU blocked in a syscall.
Event switch_out_in(uint32_t pid, uint32_t tid, uint64_t ts, int32_t sys) {
  Event e = switch_out(pid, tid, ts);
  std::get<st_sched_switch>(e).prev_sys_nr = sys;
  return e;
}

// feed_probe_job's job, but step 2's wait for the batch is a poll with a
// timeout: a timer (no known waker) ends the first attempt at +1 ms, the
// thread runs for `between` and polls again, and the loader ends that one.
void feed_retried_poll_job(Feed& f, uint64_t between) {
  f(switch_in(kRankPid, kRankPid, 50 * kMs));
  f(switch_in(kRankPid, kLoaderTid, 50 * kMs));
  for (int k = 0; k < 5; ++k) {
    const uint64_t b = probe_base(k), off = k == 2 ? between : 0;
    f(switch_out_in(kRankPid, kRankPid, b, ST_NR_POLL));
    if (k == 2) {
      f(wakeup(kRankPid, kRankPid, b + 1 * kMs, 0, 0));  // the timeout: woken from interrupt context
      f(switch_in(kRankPid, kRankPid, b + 1 * kMs));
      f(switch_out_in(kRankPid, kRankPid, b + 1 * kMs + between, ST_NR_POLL));
    }
    f(wakeup(kRankPid, kRankPid, b + 3 * kMs + off, kRankPid, kLoaderTid));
    f(switch_in(kRankPid, kRankPid, b + 3 * kMs + off));
    f(uprobe(kRankPid, kRankPid, b + 5 * kMs + off, ST_UP_NRT_EXECUTE, false));
    f(uprobe(kRankPid, kRankPid, b + 15 * kMs + off, ST_UP_NRT_EXECUTE, true));
  }
  f.finish(250 * kMs);
}

}  // namespace

TEST_CASE("attribution: a poll retried after its timeout waited for what ended the last attempt", "[steps][unit]") {
  // The step opens at the attempt the loader ended (anchors.h): the earlier
  // attempt closes step 1, and is painted there.
  auto totals = [](uint64_t between) {
    Feed f;
    feed_retried_poll_job(f, between);
    DropStats drops;
    JobAnalysis job = analyze_job(f.tl, f.tt, drops);
    REQUIRE(job.ranks.size() == 1);
    REQUIRE(job.ranks[0].steps.size() == 5);
    std::array<uint64_t, kCategories> sum{};
    for (const auto& st : job.ranks[0].steps)
      for (size_t c = 0; c < kCategories; ++c) sum[c] += st.ns[c];
    return sum;
  };
  constexpr size_t kData = static_cast<size_t>(Category::data_loading);
  constexpr size_t kOther = static_cast<size_t>(Category::other);
  // 0.1 ms of Python between the attempts: one wait for the batch.
  auto one_wait = totals(kMs / 10);
  CHECK(one_wait[kData] == 15 * kMs);
  CHECK(one_wait[kOther] == 0);
  // 3 ms of work between them: a thread that did something else first.
  auto two_waits = totals(3 * kMs);
  CHECK(two_waits[kData] == 14 * kMs);
  CHECK(two_waits[kOther] == 1 * kMs);
}
