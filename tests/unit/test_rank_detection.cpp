// SPDX-License-Identifier: Apache-2.0
// Which processes are ranks: on records fed through the decoder and the
// timeline, as a ring buffer would deliver them.
#include <catch2/catch.hpp>

#include "attribution/job_analysis.h"
#include "decode/decoder.h"
#include "timeline/thread_table.h"
#include "timeline/timeline_store.h"

using namespace steptrace;

namespace {

void feed_uprobe(TimelineStore& tl, ThreadTable& tt, uint32_t pid, uint32_t tid, uint64_t ts, uint32_t probe,
                 bool is_return) {
  st_uprobe u{};
  u.hdr.size = sizeof(u);
  u.hdr.kind = ST_EV_UPROBE;
  u.hdr.pid = pid;
  u.hdr.tid = tid;
  u.hdr.ts_ns = ts;
  u.probe = probe;
  u.is_return = is_return ? 1 : 0;
  Decoder d;
  auto e = d.decode(&u, sizeof(u));
  REQUIRE(e.has_value());
  tt.on_event(*e);
  tl.on_event(*e, &tt);
}

}  // namespace

TEST_CASE("ranks: a thread with more than 2^31/1e6 executions is still a rank", "[attribution]") {
  // 3000 nrt_execute calls of 1 ms every 2 ms on one thread: an int score
  // (execs * 1e6 + ...) overflowed past 2147 of them and the rank vanished.
  const uint32_t pid = 4242;
  const uint64_t ms = 1'000'000;
  const int n = 3000;
  TimelineStore tl;
  ThreadTable tt;
  for (int i = 0; i < n; ++i) {
    const uint64_t t0 = 100 * ms + static_cast<uint64_t>(i) * 2 * ms;
    feed_uprobe(tl, tt, pid, pid, t0, ST_UP_NRT_EXECUTE, false);
    feed_uprobe(tl, tt, pid, pid, t0 + ms, ST_UP_NRT_EXECUTE, true);
  }
  const uint64_t end = 100 * ms + static_cast<uint64_t>(n) * 2 * ms + ms;
  tl.finish(end, &tt);
  DropStats drops;
  JobAnalysis job = analyze_job(tl, tt, drops);
  REQUIRE(job.ranks.size() == 1);
  CHECK(job.ranks[0].pid == pid);
  CHECK(job.ranks[0].source == StepSource::runtime_probes);
  // One step per execution (the last one may stay open at the window's end).
  CHECK(job.ranks[0].steps.size() >= static_cast<size_t>(n - 1));
}
