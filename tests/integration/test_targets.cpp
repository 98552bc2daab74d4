// SPDX-License-Identifier: Apache-2.0
// [root] Target selection and loss accounting: children are followed,
// unrelated processes are not recorded, a full ring buffer is counted.
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "export/summary.h"
#include "export/text_report.h"
#include "support/workload.h"

using namespace steptrace;
using namespace steptrace::test;

TEST_CASE("targets: a forked child of the traced job is followed", "[root][targets]") {
  require_root();
  auto* grandchild = static_cast<pid_t*>(
      mmap(nullptr, sizeof(pid_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(grandchild != MAP_FAILED);
  Workload w([grandchild] {
    pid_t c = fork();
    if (c == 0) {
      usleep(10'000);
      volatile uint64_t x = 0;
      for (int i = 0; i < 1'000'000; ++i) x = x + static_cast<uint64_t>(i);
      _exit(0);
    }
    *grandchild = c;
    int st;
    waitpid(c, &st, 0);
    return 0;
  });
  auto r = trace_workload(w, attach_options(w.pid()));
  const ThreadInfo* g = r.analysis.threads.find(static_cast<uint32_t>(*grandchild));
  REQUIRE(g != nullptr);
  CHECK(g->pid == static_cast<uint32_t>(*grandchild));
  CHECK(g->ns(ThreadState::running) > 0);
  CHECK(g->exited);
}

TEST_CASE("targets: an unrelated process is not recorded", "[root][targets]") {
  require_root();
  Workload unrelated([] {
    for (int i = 0; i < 50; ++i) usleep(2'000);
    return 0;
  });
  unrelated.release();
  Workload w([] {
    for (int i = 0; i < 20; ++i) usleep(5'000);
    return 0;
  });
  auto r = trace_workload(w, attach_options(w.pid()));
  unrelated.wait();
  bool saw_target = false;
  for (const auto& [tid, t] : r.analysis.threads.threads()) {
    CHECK(t.pid != static_cast<uint32_t>(unrelated.pid()));
    CHECK(t.pid != static_cast<uint32_t>(getpid()));  // never the tracer itself
    if (t.pid == static_cast<uint32_t>(w.pid())) saw_target = true;
  }
  CHECK(saw_target);
}

TEST_CASE("drops: a ring buffer overflow is counted per class and reported", "[root][drops]") {
  require_root();
  // Two threads ping-pong through pipes: ~4 records per round trip.
  Workload w([] {
    int a[2], b[2];
    if (pipe(a) || pipe(b)) return 1;
    constexpr int kRounds = 40'000;
    std::thread peer([&] {
      char c;
      for (int i = 0; i < kRounds; ++i) {
        if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(2);
      }
    });
    char c = 0;
    for (int i = 0; i < kRounds; ++i) {
      if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 3;
    }
    peer.join();
    return 0;
  });
  auto o = attach_options(w.pid());
  o.ring_mib = 1;       // ~20k records
  o.drain_ms = 1000;    // drained rarely, so it must overflow
  o.ring_wake_pct = 0;  // and not woken early by a filling ring
  auto r = trace_workload(w, o);
  CHECK(r.drops.dropped[ST_EV_SCHED_SWITCH] + r.drops.dropped[ST_EV_SCHED_WAKEUP] > 0);
  CHECK(r.incomplete());
  // Nothing is lost silently in userspace: every record the kernel emitted was decoded.
  CHECK(r.decode.total_decoded() == r.drops.total_emitted());
  CHECK(r.records == r.drops.total_emitted());
  auto text = format_report_text(r, {false, 0});
  CHECK(text.find("INCOMPLETE") != std::string::npos);
  auto j = summary_json(r);
  CHECK(j["incomplete"] == true);
  CHECK(j["events"]["sched_switch"]["dropped"].get<uint64_t>() == r.drops.dropped[ST_EV_SCHED_SWITCH]);
}

TEST_CASE("losses: a full target map loses forked children, counted and reported INCOMPLETE", "[root][drops]") {
  require_root();
  // The job and 3 children fit a 4-entry target set; the other 5 children,
  // alive at the same time, are refused at fork.
  constexpr int kChildren = 8, kMapEntries = 4;
  auto* kids = static_cast<pid_t*>(
      mmap(nullptr, sizeof(pid_t) * kChildren, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(kids != MAP_FAILED);
  Workload w([kids] {
    for (int i = 0; i < kChildren; ++i) {
      pid_t c = fork();
      if (c == 0) {
        usleep(200'000);  // all alive together
        volatile uint64_t x = 0;
        for (int j = 0; j < 200'000; ++j) x = x + static_cast<uint64_t>(j);
        _exit(0);
      }
      kids[i] = c;
    }
    for (int i = 0; i < kChildren; ++i) waitpid(kids[i], nullptr, 0);
    return 0;
  });
  auto o = attach_options(w.pid());
  o.max_targets = kMapEntries;
  auto r = trace_workload(w, o);
  INFO(format_report_text(r, {false, 0}).substr(0, 3000));
  CHECK(r.drops.total_dropped() == 0);  // the ring kept up: the loss alone marks it
  CHECK(r.drops.losses[ST_LOSS_FORK_TARGET] == kChildren - (kMapEntries - 1));
  int followed = 0;
  for (int i = 0; i < kChildren; ++i) {
    const ThreadInfo* t = r.analysis.threads.find(static_cast<uint32_t>(kids[i]));
    if (t && t->ns(ThreadState::running) > 0) ++followed;
  }
  CHECK(followed == kMapEntries - 1);
  CHECK(r.incomplete());
  auto j = summary_json(r);
  CHECK(j["incomplete"] == true);
  CHECK(j["losses"]["fork_target_full"]["count"] == kChildren - (kMapEntries - 1));
  auto text = format_report_text(r, {false, 0});
  CHECK(text.find("INCOMPLETE: 5 new processes not followed (target map full)") != std::string::npos);
}
