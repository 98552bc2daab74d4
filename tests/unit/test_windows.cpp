// SPDX-License-Identifier: Apache-2.0
// Long sessions: the windowed analysis (Analysis::fold, pipeline/step_ledger.h)
// against the whole-session one on the same long capture, the bounds it
// keeps, and the entries a reused tid or socket address must start.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "decode/decoder.h"
#include "pipeline/analysis.h"
#include "attribution/device_signal_pass.h"
#include "attribution/interval_painter.h"
#include "export/report_stats.h"
#include "capture/capture_file.h"
#include "pipeline/pipeline.h"
#include "pipeline/replay.h"
#include "support/shell.h"

using namespace steptrace;
using steptrace::test::sh;

namespace {

constexpr uint64_t kMs = 1'000'000;

// A capture of the straggler fixture's job running `copies` times as long (tools/bench/capgen).
std::string long_capture(int copies) {
  const std::string out = "/tmp/steptrace-windows-" + std::to_string(copies) + "-" + std::to_string(getpid()) + ".cap";
  auto r = sh(std::string(CAPGEN_BIN) + " " + FIXTURE_DIR + "/straggler.cap " + out + " " + std::to_string(copies));
  INFO(r.out);
  REQUIRE(r.rc == 0);
  return out;
}

WindowPolicy every(double s, size_t keep = 4096, size_t cap = 0) { return WindowPolicy::from(s, cap, static_cast<uint32_t>(keep)); }

template <typename T>
Event decoded(const T& rec) {
  Decoder d;
  auto e = d.decode(&rec, sizeof(rec));
  REQUIRE(e.has_value());
  return *e;
}

template <typename T>
T header(uint32_t kind, uint32_t pid, uint32_t tid, uint64_t ts) {
  T r{};
  r.hdr.size = sizeof(T);
  r.hdr.kind = kind;
  r.hdr.pid = pid;
  r.hdr.tid = tid;
  r.hdr.ts_ns = ts;
  return r;
}

void run_slice(Analysis& a, uint32_t pid, uint32_t tid, uint64_t from, uint64_t to) {
  auto in = header<st_sched_switch>(ST_EV_SCHED_SWITCH, 1, 1, from);
  in.next_pid = pid;
  in.next_tid = tid;
  in.flags = ST_SWITCH_NEXT_TARGET;
  in.prev_queue_ns = ST_QUEUE_UNKNOWN;
  a.on_event(decoded(in));
  auto out = header<st_sched_switch>(ST_EV_SCHED_SWITCH, pid, tid, to);
  out.prev_state = 1;
  out.flags = ST_SWITCH_PREV_TARGET;
  out.prev_sys_nr = -1;
  out.prev_queue_ns = ST_QUEUE_UNKNOWN;
  a.on_event(decoded(out));
}

st_net_xfer send_on(uint64_t sock, uint16_t sport, uint64_t ts, int32_t bytes) {
  auto n = header<st_net_xfer>(ST_EV_NET_XFER, 700, 700, ts);
  n.sock_id = sock;
  n.tuple.family = 2;
  n.tuple.sport = sport;
  n.tuple.dport = 29500;
  n.bytes = bytes;
  n.dir = ST_NET_SEND;
  n.dur_ns = 1000;
  return n;
}

}  // namespace

// The folded analysis against the whole-session one: the same steps where
// it put them, the same totals.
void check_same_steps(const SessionReport& whole, const SessionReport& folded) {
  const JobAnalysis& a = whole.job;
  const JobAnalysis& b = folded.job;
  REQUIRE(a.ranks.size() == 2);
  REQUIRE(b.ranks.size() == a.ranks.size());
  CHECK(b.verdict.category == a.verdict.category);
  CHECK(b.verdict.straggler_rank == a.verdict.straggler_rank);
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const RankResult& x = a.ranks[i];
    const RankResult& y = b.ranks[i];
    INFO("rank " << i);
    CHECK(y.pid == x.pid);
    CHECK(x.steps_total == x.steps.size());
    CHECK(x.steps_total >= 400);
    CHECK(y.steps_total == x.steps_total);
    CHECK(y.counted_steps == x.counted_steps);
    CHECK(std::llabs(static_cast<long long>(y.straggler_steps) - static_cast<long long>(x.straggler_steps)) <= 1);
    // Every step where the whole-session analysis put it (boundaries within 0.1 ms).
    REQUIRE(y.steps.size() == x.steps.size());
    size_t moved = 0;
    for (size_t k = 0; k < x.steps.size(); ++k) {
      CHECK(y.steps[k].index == x.steps[k].index);
      const auto d0 = std::llabs(static_cast<long long>(y.steps[k].start_ns - x.steps[k].start_ns));
      const auto d1 = std::llabs(static_cast<long long>(y.steps[k].end_ns - x.steps[k].end_ns));
      moved += d0 > 100'000 || d1 > 100'000;
    }
    CHECK(moved == 0);
    // Each category's total within 0.5 % of the counted time.
    const double counted = static_cast<double>(x.counted_ns);
    CHECK(std::fabs(static_cast<double>(y.counted_ns) - counted) <= 0.001 * counted);
    for (size_t c = 0; c < kCategories; ++c) {
      INFO("category " << kCategoryNames[c]);
      CHECK(std::fabs(static_cast<double>(y.total[c]) - static_cast<double>(x.total[c])) <= 0.005 * counted);
    }
  }
}

TEST_CASE("windows: a long capture folded every second gives the whole session's steps and totals", "[windows]") {
  const std::string cap = long_capture(40);  // ~32 s of a 2-rank job, ~960 steps
  auto whole = replay_capture(cap);
  auto folded = replay_capture(cap, every(1.0));
  std::remove(cap.c_str());
  REQUIRE(whole.ok());
  REQUIRE(folded.ok());
  CHECK(whole->windows.folds == 0);
  CHECK(folded->windows.folds >= 20);
  CHECK(folded->windows.early_folds == 0);  // this job's windows stay far under kFoldAboveBytes
  check_same_steps(*whole, *folded);
  // What stays in memory: one window of timeline, not the session.
  CHECK(folded->analysis.timeline.entries() * 5 < whole->analysis.timeline.entries());
}

// A busy job's window folds before its time is up once its timeline holds
// fold_above_bytes: the same steps and totals, a smaller window, and nothing
// forgotten (that is the hard cap's, not this).
TEST_CASE("windows: a window that fills its share of memory folds early and loses nothing", "[windows]") {
  const std::string cap = long_capture(40);
  auto whole = replay_capture(cap);
  WindowPolicy p = every(60.0);  // no fold on time in these ~32 s
  p.fold_above_bytes = 256 * 1024;
  auto early = replay_capture(cap, p);
  auto timed = replay_capture(cap, every(60.0));
  std::remove(cap.c_str());
  REQUIRE(whole.ok());
  REQUIRE(early.ok());
  REQUIRE(timed.ok());
  CHECK(timed->windows.folds == 0);
  CHECK(early->windows.early_folds >= 5);
  CHECK(early->windows.folds >= early->windows.early_folds);
  CHECK(early->windows.memory_cap_forgets == 0);
  CHECK_FALSE(early->incomplete());
  check_same_steps(*whole, *early);
  // At most a window over the threshold and the second between two checks.
  CHECK(early->analysis.timeline.used_bytes() < 4 * p.fold_above_bytes);
  CHECK(early->analysis.timeline.used_bytes() * 4 < whole->analysis.timeline.used_bytes());
}

TEST_CASE("windows: the steps-only peek (the hang probe) finds the ranks and steps a whole peek does, folded ones included",
          "[windows]") {
  const std::string cap = long_capture(10);  // ~8 s of a 2-rank job
  Pipeline pipe;
  pipe.set_windows(every(1.0));
  uint64_t next = 0;
  size_t peeks = 0, steps_compared = 0;
  auto c = read_capture(cap, [&](const void* d, size_t n) {
    pipe.push(d, n);
    pipe.advance();
    const uint64_t now = pipe.newest_ts();
    if (!now || now < next) return;
    const bool first = next == 0;
    next = now + 700 * kMs;
    if (first) return;
    const JobAnalysis whole = pipe.analysis().peek(now, DropStats{}, nullptr);
    const JobAnalysis steps = pipe.analysis().peek_steps(now);
    ++peeks;
    INFO("peek " << peeks);
    CHECK(steps.skipped_warmup_steps == whole.skipped_warmup_steps);
    REQUIRE(steps.ranks.size() == whole.ranks.size());
    for (size_t i = 0; i < whole.ranks.size(); ++i) {
      const RankResult& x = whole.ranks[i];
      const RankResult& y = steps.ranks[i];
      INFO("rank " << i);
      CHECK(y.pid == x.pid);
      CHECK(y.rank == x.rank);
      CHECK(y.main_tid == x.main_tid);
      CHECK(y.steps_total == x.steps_total);
      REQUIRE(y.steps.size() == x.steps.size());
      for (size_t k = 0; k < x.steps.size(); ++k) {
        CHECK(y.steps[k].index == x.steps[k].index);
        CHECK(y.steps[k].start_ns == x.steps[k].start_ns);
        CHECK(y.steps[k].end_ns == x.steps[k].end_ns);
      }
      steps_compared += x.steps.size();
      // Nothing attributed in the window (a fold keeps each rank's last two
      // steps in it): those carry no shares; the folded ones keep theirs.
      if (!y.steps.empty()) {
        CHECK(y.steps.back().ns == CategoryNs{});
        CHECK(x.steps.back().ns != CategoryNs{});
      }
    }
  });
  std::remove(cap.c_str());
  REQUIRE(c.ok());
  CHECK(peeks >= 8);
  CHECK(steps_compared >= 1000);
  CHECK(pipe.window_stats().folds >= 4);  // later peeks joined folded steps
}

TEST_CASE("windows: what a folded session holds does not grow with its length", "[windows]") {
  const std::string c10 = long_capture(10), c40 = long_capture(40);
  auto r10 = replay_capture(c10, every(1.0, 64));
  auto r40 = replay_capture(c40, every(1.0, 64));
  std::remove(c10.c_str());
  std::remove(c40.c_str());
  REQUIRE(r10.ok());
  REQUIRE(r40.ok());
  const size_t e10 = r10->analysis.timeline.entries(), e40 = r40->analysis.timeline.entries();
  INFO("timeline entries at the end: " << e10 << " (10 copies), " << e40 << " (40 copies)");
  CHECK(e40 <= e10 * 3 / 2);
  for (const auto& rk : r40->job.ranks) {
    // The detail is bounded (the last 64 folded steps and the last window's);
    // the counts are not cut.
    CHECK(rk.steps.size() < 64 + 40);
    CHECK(rk.steps_total >= 4 * 118);
  }
  CHECK(r40->windows.steps_out_of_detail > r10->windows.steps_out_of_detail);
  CHECK(r40->analysis.ledger.memory_bytes() <= r10->analysis.ledger.memory_bytes() * 3 / 2);
}

TEST_CASE("windows: --keep-steps bounds the detail, not the totals", "[windows]") {
  const std::string cap = long_capture(20);
  auto all = replay_capture(cap, every(1.0));
  auto few = replay_capture(cap, every(1.0, 16));
  std::remove(cap.c_str());
  REQUIRE(all.ok());
  REQUIRE(few.ok());
  REQUIRE(few->job.ranks.size() == all->job.ranks.size());
  for (size_t i = 0; i < all->job.ranks.size(); ++i) {
    const auto& x = all->job.ranks[i];
    const auto& y = few->job.ranks[i];
    CHECK(y.steps.size() < x.steps.size());
    CHECK(y.steps_total == x.steps_total);
    CHECK(y.counted_ns == x.counted_ns);
    CHECK(y.total == x.total);
    // The steps kept are the most recent.
    REQUIRE(!y.steps.empty());
    CHECK(y.steps.back().index == x.steps.back().index);
  }
  CHECK(few->windows.steps_out_of_detail > 0);
  CHECK(few->job.mean_share == all->job.mean_share);
  // Percentiles still cover every counted step: the ones out of detail from
  // a histogram, within 1 % of the exact value.
  const StepStats exact = step_stats(all->job), streamed = step_stats(few->job);
  CHECK_FALSE(exact.approximate);
  CHECK(streamed.approximate);
  CHECK(streamed.counted == exact.counted);
  auto near = [](uint64_t got, uint64_t want) {
    return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= 0.011 * static_cast<double>(want) + 1000;
  };
  CHECK(near(streamed.step.p50, exact.step.p50));
  CHECK(near(streamed.step.p90, exact.step.p90));
  CHECK(near(streamed.step.p99, exact.step.p99));
  CHECK(streamed.step.max == exact.step.max);
  for (size_t c = 0; c < kCategories; ++c) {
    INFO("category " << kCategoryNames[c]);
    CHECK(near(streamed.category[c].p50, exact.category[c].p50));
    CHECK(near(streamed.category[c].p99, exact.category[c].p99));
    CHECK(streamed.category[c].max == exact.category[c].max);
  }
}

TEST_CASE("windows: the memory cap folds early, a window over it alone is forgotten, and the report says so",
          "[windows]") {
  const std::string cap = long_capture(10);
  // No periodic folds: only the cap makes them. 256 KiB holds a few folded windows' worth at most.
  auto r = replay_capture(cap, every(0, 4096, 256 * 1024));
  std::remove(cap.c_str());
  REQUIRE(r.ok());
  CHECK(r->windows.memory_cap_hits > 0);
  CHECK(r->windows.folds > 0);
  CHECK(r->windows.peak_memory_bytes > 256 * 1024);
  if (r->windows.memory_cap_forgets > 0) {
    CHECK(r->incomplete());
    CHECK(r->job.verdict.incomplete);
  }
  // A cap no window can fit under: every check forgets, and that is never silent.
  const std::string cap2 = long_capture(4);
  auto tiny = replay_capture(cap2, every(0, 4096, 1024));
  std::remove(cap2.c_str());
  REQUIRE(tiny.ok());
  CHECK(tiny->windows.memory_cap_forgets > 0);
  CHECK(tiny->incomplete());
  bool said = false;
  for (const auto& e : tiny->job.verdict.evidence) said = said || e.find("memory cap") != std::string::npos;
  CHECK(said);
}

TEST_CASE("timeline: a reused tid starts a new entry, and the dead thread keeps its own", "[windows]") {
  Analysis a;
  auto born = header<st_task_new>(ST_EV_TASK_NEW, 100, 100, 1 * kMs);
  born.child_pid = 500;
  born.child_tid = 500;
  a.on_event(decoded(born));
  run_slice(a, 500, 500, 2 * kMs, 5 * kMs);
  auto dies = header<st_task_exit>(ST_EV_TASK_EXIT, 500, 500, 6 * kMs);
  a.on_event(decoded(dies));
  // The kernel hands tid 500 to a thread of another process.
  auto again = header<st_task_new>(ST_EV_TASK_NEW, 600, 600, 10 * kMs);
  again.child_pid = 600;
  again.child_tid = 500;
  again.flags = ST_TASK_IS_THREAD;
  a.on_event(decoded(again));
  run_slice(a, 600, 500, 11 * kMs, 19 * kMs);
  a.timeline.finish(20 * kMs, &a.threads);

  int timelines = 0, infos = 0;
  for (const auto& [key, t] : a.timeline.threads()) {
    if (t.tid != 500) continue;
    ++timelines;
    if (t.pid == 500) {
      REQUIRE(t.segs.size() >= 1);
      CHECK(t.segs.front().end - t.segs.front().start == 3 * kMs);
    } else {
      CHECK(t.pid == 600);
    }
  }
  CHECK(timelines == 2);
  for (const auto& [key, t] : a.threads.threads()) {
    if (t.tid != 500) continue;
    ++infos;
    CHECK(t.ns(ThreadState::running) == (t.pid == 500 ? 3 * kMs : 8 * kMs));
    CHECK(t.exited == (t.pid == 500));
  }
  CHECK(infos == 2);
  REQUIRE(a.timeline.find(500) != nullptr);
  CHECK(a.timeline.find(500)->pid == 600);
  REQUIRE(a.threads.find(500) != nullptr);
  CHECK(a.threads.find(500)->pid == 600);
}

TEST_CASE("sockets: a reused socket address starts a new socket with its own tuple and bytes", "[windows]") {
  Analysis a;
  const uint64_t addr = 0xffff888012345600ull;
  a.on_event(decoded(send_on(addr, 40000, 1 * kMs, 1000)));
  a.on_event(decoded(send_on(addr, 40000, 2 * kMs, 1000)));
  auto closed = header<st_tcp_state>(ST_EV_TCP_STATE, 700, 700, 3 * kMs);
  closed.sock_id = addr;
  closed.tuple = send_on(addr, 40000, 0, 0).tuple;
  closed.old_state = 4;  // FIN_WAIT1
  closed.new_state = 7;  // CLOSE
  a.on_event(decoded(closed));
  // The same address, a new connection (same ports: only the close tells them apart).
  a.on_event(decoded(send_on(addr, 40000, 4 * kMs, 5000)));
  // And again, without a close seen, but with another 4-tuple.
  a.on_event(decoded(send_on(addr, 40001, 5 * kMs, 7000)));

  REQUIRE(a.collectors.socks.size() == 3);
  std::vector<uint64_t> sent;
  for (const auto& [key, s] : a.collectors.socks) sent.push_back(s.send.bytes);
  std::sort(sent.begin(), sent.end());
  CHECK(sent == std::vector<uint64_t>{2000, 5000, 7000});
  REQUIRE(a.timeline.sockets().size() == 3);
  int port40001 = 0;
  for (const auto& [key, t] : a.timeline.sockets()) port40001 += t.sport == 40001;
  CHECK(port40001 == 1);
  CHECK(a.sockets.reused() == 2);
  // The first connection keeps the address as its key.
  CHECK(a.collectors.socks.count(addr) == 1);
}

TEST_CASE("painter: the sweep splits a window as an instant-by-instant reference does, and names what lies beneath contention",
          "[windows]") {
  // Random paints with equal priorities, nested and overlapping, long ones
  // across many short ones; the reference walks every nanosecond.
  uint64_t seed = 12345;
  auto rnd = [&](uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  for (int round = 0; round < 200; ++round) {
    const uint64_t ws = 1000, we = 1000 + 50 + rnd(400);
    std::vector<Paint> paints;
    const int n = static_cast<int>(rnd(40));
    for (int i = 0; i < n; ++i) {
      uint64_t a = 900 + rnd(600), len = rnd(4) == 0 ? rnd(500) : rnd(30);
      paints.push_back({a, a + len, static_cast<int>(rnd(6)), static_cast<Category>(rnd(kCategories))});
    }
    // And, where cpu_contention wins, what wins without it (Painted::under).
    CategoryNs want{}, want_under{};
    auto winner = [&](uint64_t t, bool skip_contention) {
      int best = -1;
      uint64_t best_start = 0;
      Category cat = Category::other;
      for (const auto& p : paints) {
        if (p.start > t || p.end <= t || (skip_contention && p.category == Category::cpu_contention)) continue;
        if (p.priority > best || (p.priority == best && p.start < best_start)) {
          best = p.priority;
          best_start = p.start;
          cat = p.category;
        }
      }
      return cat;
    };
    for (uint64_t t = ws; t < we; ++t) {
      const Category cat = winner(t, false);
      ++want[static_cast<size_t>(cat)];
      if (cat == Category::cpu_contention) ++want_under[static_cast<size_t>(winner(t, true))];
    }
    // Equal priority and equal start is a tie either answer may take: only
    // compare rounds without one.
    bool tie = false;
    for (size_t i = 0; i < paints.size(); ++i)
      for (size_t j = i + 1; j < paints.size(); ++j)
        tie = tie || (paints[i].priority == paints[j].priority && paints[i].start == paints[j].start &&
                      paints[i].category != paints[j].category);
    if (tie) continue;
    INFO("round " << round);
    CHECK(paint_window(ws, we, paints) == want);
    const Painted under = paint_window_under(ws, we, paints, Category::cpu_contention);
    CHECK(under.ns == want);
    CHECK(under.under == want_under);
  }
}

TEST_CASE("windows: a CPU-only rank folds once its burst model is known, or once it has 64 steps", "[windows]") {
  auto job = [](size_t steps, bool known) {
    JobAnalysis ja;
    RankResult r;
    r.pid = 4242;
    r.host_only = true;
    if (known) r.burst = {5 * kMs, 1 << 20};
    for (size_t k = 0; k < steps; ++k) {
      StepResult st;
      st.index = static_cast<int>(k);
      st.start_ns = 1000 * kMs + k * 50 * kMs;
      st.end_ns = st.start_ns + 50 * kMs;
      r.steps.push_back(st);
    }
    ja.ranks.push_back(r);
    return ja;
  };
  TimelineStore tl;
  const uint64_t now = 1000 * kMs + 64 * 50 * kMs;
  StepLedger unsettled;
  CHECK(unsettled.fold(job(20, false), tl, now) == 0);  // may still be cut otherwise: kept open
  StepLedger learned;
  CHECK(learned.fold(job(20, true), tl, now) > 0);
  StepLedger bounded;
  CHECK(bounded.fold(job(64, false), tl, now) > 0);  // never agreeing: folded anyway, memory stays bounded
}

TEST_CASE("timeline: a finished view closes the open state in place and leaves the store as it was", "[windows]") {
  Analysis a;
  run_slice(a, 700, 700, 1 * kMs, 2 * kMs);  // blocked since 2 ms: an open sleep
  auto in = header<st_sched_switch>(ST_EV_SCHED_SWITCH, 1, 1, 3 * kMs);
  in.next_pid = 700;
  in.next_tid = 701;
  in.flags = ST_SWITCH_NEXT_TARGET;
  in.prev_queue_ns = ST_QUEUE_UNKNOWN;
  a.on_event(decoded(in));  // 701 runs from 3 ms on: an open slice
  // Nested calls on 701: the outer one ends last, so its span comes second
  // in arrival (end) order and first by start.
  auto inner = header<st_accel_ioctl>(ST_EV_ACCEL_IOCTL, 700, 701, 10 * kMs);
  inner.enter_ts = 9 * kMs;
  inner.cmd = 1;
  a.on_event(decoded(inner));
  auto outer = header<st_accel_ioctl>(ST_EV_ACCEL_IOCTL, 700, 701, 12 * kMs);
  outer.enter_ts = 4 * kMs;
  outer.cmd = 2;
  a.on_event(decoded(outer));

  const TimelineStore before = a.timeline;
  TimelineStore finished = a.timeline;
  ThreadTable finished_totals = a.threads;
  finished.finish(20 * kMs, &finished_totals);

  const auto same_segs = [](const ThreadTimeline& x, const ThreadTimeline& y) {
    if (x.segs.size() != y.segs.size()) return false;
    for (size_t i = 0; i < x.segs.size(); ++i)
      if (x.segs[i].start != y.segs[i].start || x.segs[i].end != y.segs[i].end || x.segs[i].state != y.segs[i].state)
        return false;
    return true;
  };
  const auto cmds = [](const ThreadTimeline& t) {
    std::vector<uint32_t> c;
    for (const auto& s : t.spans) c.push_back(s.cmd);
    return c;
  };
  {
    ThreadTable totals = a.threads;
    const TimelineStore::FinishedView view(a.timeline, 20 * kMs, &totals);
    REQUIRE(a.timeline.threads().size() == finished.threads().size());
    for (const auto& [key, t] : a.timeline.threads()) {
      const ThreadTimeline& f = finished.threads().at(key);
      CHECK(same_segs(t, f));
      CHECK(cmds(t) == cmds(f));
      CHECK(t.max_span_ns == f.max_span_ns);
    }
    const ThreadTimeline* t701 = a.timeline.find(701);
    REQUIRE(t701 != nullptr);
    REQUIRE(!t701->segs.empty());
    CHECK(t701->segs.back().end == 20 * kMs);  // the open slice, closed at the view's end
    CHECK(cmds(*t701) == std::vector<uint32_t>{2, 1});  // by start
    for (uint32_t tid : {700u, 701u})
      CHECK(totals.find(tid)->ns(ThreadState::running) == finished_totals.find(tid)->ns(ThreadState::running));
    CHECK(totals.find(700)->ns(ThreadState::sleeping) == 18 * kMs);
  }
  for (const auto& [key, t] : a.timeline.threads()) {
    const ThreadTimeline& b = before.threads().at(key);
    CHECK(same_segs(t, b));
    CHECK(cmds(t) == cmds(b));
    CHECK(t.cur == b.cur);
    CHECK(t.cur_since == b.cur_since);
  }
  CHECK(cmds(*a.timeline.find(701)) == std::vector<uint32_t>{1, 2});  // arrival order again
  CHECK(a.threads.find(700)->ns(ThreadState::sleeping) == 0);        // the live totals untouched
  // The live state machine goes on from its open state: 701's slice ends at 25 ms.
  auto out = header<st_sched_switch>(ST_EV_SCHED_SWITCH, 700, 701, 25 * kMs);
  out.prev_state = 1;
  out.flags = ST_SWITCH_PREV_TARGET;
  out.prev_sys_nr = -1;
  out.prev_queue_ns = ST_QUEUE_UNKNOWN;
  a.on_event(decoded(out));
  const ThreadTimeline* t701 = a.timeline.find(701);
  REQUIRE(!t701->segs.empty());
  CHECK(t701->segs.back().state == ThreadState::running);
  CHECK(t701->segs.back().start == 3 * kMs);
  CHECK(t701->segs.back().end == 25 * kMs);
}

// A network proxy named by an earlier window (by behaviour, which this window
// alone may not show) is measured in the next one: its run-queue delay in the
// step, how often it was preempted and by whom.
TEST_CASE("windows: a proxy named by an earlier window is measured in the next", "[windows]") {
  Analysis a;
  auto in = [&](uint32_t tid, uint64_t ts) {
    auto e = header<st_sched_switch>(ST_EV_SCHED_SWITCH, 1, 1, ts);
    e.next_pid = 100;
    e.next_tid = tid;
    e.flags = ST_SWITCH_NEXT_TARGET;
    e.prev_queue_ns = ST_QUEUE_UNKNOWN;
    a.on_event(decoded(e));
  };
  auto out = [&](uint32_t tid, uint64_t ts, uint32_t state, uint32_t next, uint32_t flags) {
    auto e = header<st_sched_switch>(ST_EV_SCHED_SWITCH, 100, tid, ts);
    e.next_pid = next;
    e.next_tid = next;
    e.prev_state = state;
    e.flags = ST_SWITCH_PREV_TARGET | flags;
    e.prev_sys_nr = -1;
    e.prev_queue_ns = ST_QUEUE_UNKNOWN;
    a.on_event(decoded(e));
  };
  // Thread 101 of rank 100: runs, is preempted by 200 for 2 ms, runs, sleeps.
  in(101, 1 * kMs);
  out(101, 2 * kMs, 0, 200, ST_SWITCH_PREEMPT);
  in(101, 4 * kMs);
  out(101, 5 * kMs, 1, 1, 0);
  a.timeline.finish(20 * kMs, &a.threads);

  auto measure = [&](const std::vector<signals::ProxyThread>* known, signals::DeviceSignalsSummary& S) {
    RankResult r;
    r.pid = 100;
    r.main_tid = 100;
    StepResult st;
    st.index = 1;
    st.start_ns = 0;
    st.end_ns = 10 * kMs;
    r.steps.push_back(st);
    std::vector<RankResult*> ranks{&r};
    apply_device_signals(ranks, a.timeline, a.threads, nullptr, 1, known, &S);
    return r.steps.front().dev;
  };
  signals::DeviceSignalsSummary none;
  const auto alone = measure(nullptr, none);
  CHECK(none.proxies.empty());  // no proxy's name, no device collective to judge behaviour by
  CHECK(alone.proxy_runq_ns == 0);

  const std::vector<signals::ProxyThread> known{{100, 101, "x-worker", "behaviour"}};
  signals::DeviceSignalsSummary S;
  const auto dev = measure(&known, S);
  REQUIRE(S.proxies.size() == 1);
  CHECK(S.proxies[0].tid == 101);
  CHECK(S.proxies[0].how == "behaviour");
  CHECK(dev.proxy_runq_ns == 2 * kMs);
  CHECK(dev.proxy_preempted == 1);
  CHECK(dev.proxy_preemptors[0].tid == 200);
  CHECK(dev.proxy_preemptors[0].n == 1);
  CHECK(S.proxy_runq_ms_per_step == Approx(2.0));
  CHECK(S.proxy_preempted_per_step == Approx(1.0));
  CHECK(std::string(S.proxy_top_preemptor) == "?/200");
}
