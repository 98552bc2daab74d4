// SPDX-License-Identifier: Apache-2.0
// bench-capstat: count the records of a steptrace capture file by kind, and
// those that involve steptrace itself (B10).
//
//   bench-capstat FILE --self PID      -> one JSON object on stdout
//
// Two counts. "self_records": every record that names steptrace (a switch
// to or from one of its threads, a wakeup it performed, a record whose
// subject is steptrace). "caused_records": the records that would not exist
// had steptrace not run, which is what the self-caused target means:
//  - a slice of a steptrace thread on a CPU is entered by a switch from a
//    target X (recorded) and left by a switch to a target Y (recorded). Had
//    steptrace not run, X -> Y would be one record where the slice made two:
//    it adds one record when both ends are recorded, and none when one is
//    (steptrace woke on an idle CPU or left it idle). It adds none either
//    when Y was woken during the slice: Y was not runnable when X left, so
//    the CPU would have gone X -> idle -> Y, two records as well. It adds
//    two when X was preempted by it (X would not have left its CPU at all).
//    "caused_records_if_runnable" is the count that assumes Y was always
//    runnable (the estimate before the wake-up check).
//  - a wakeup whose waker is steptrace adds a record unless the wakee slept
//    in nanosleep/clock_nanosleep: those end by a timer interrupt, which
//    the kernel charges to whatever task is current (419 of 420 such
//    wakeups of a trainsim run were of this kind); the signal steptrace may
//    send at the end to a sleeping job is the one real one this misses.
// "self_detail" gives the parts, "self_by_tenth" places the named records in
// the capture's time (tenths of its span): start-up and shutdown against the
// steady state.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capture/capture_file.h"
#include "steptrace_abi.h"

using namespace steptrace;

int main(int argc, char** argv) {
  if (argc != 4 || std::strcmp(argv[2], "--self") != 0) {
    std::fprintf(stderr, "usage: bench-capstat FILE --self PID\n");
    return 2;
  }
  const uint32_t self = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  uint64_t by_kind[ST_EV_KIND_MAX] = {};
  uint64_t self_kind[ST_EV_KIND_MAX] = {};
  uint64_t total = 0, self_total = 0, short_records = 0;
  uint64_t preempted_by_self = 0, blocked_to_self = 0, in_from_self = 0, woken_by_self = 0, subject_self = 0;
  std::vector<uint64_t> self_ts;
  // Of the wakeups by steptrace: the syscall the target slept in, the waking
  // thread; of the slices: the steptrace thread a target left its CPU to.
  std::map<std::string, uint64_t> woken_in_sys, woken_by_tid, entered_tid;
  uint64_t first_ts = UINT64_MAX, last_ts = 0;
  uint64_t caused_wakeups = 0;
  struct SelfSwitch {
    uint64_t ts;
    uint32_t cpu;
    bool in;       // a target left its CPU to steptrace
    bool preempt;  // ... while still runnable
    uint32_t next_tid;  // left to (a switch out of steptrace)
  };
  // Every recorded wake-up's time, by the woken thread.
  std::map<uint32_t, std::vector<uint64_t>> wakeups_of;
  std::vector<SelfSwitch> self_switches;
  auto r = read_capture(argv[1], [&](const void* d, size_t n) {
    ++total;
    if (n < sizeof(st_event_header)) {
      ++short_records;
      return;
    }
    st_event_header h;
    std::memcpy(&h, d, sizeof(h));
    uint32_t k = h.kind < ST_EV_KIND_MAX ? h.kind : 0;
    ++by_kind[k];
    if (h.ts_ns) {
      first_ts = std::min<uint64_t>(first_ts, h.ts_ns);
      last_ts = std::max<uint64_t>(last_ts, h.ts_ns);
    }
    bool mine = h.pid == self;
    if (h.kind == ST_EV_SCHED_SWITCH && n >= ST_SCHED_SWITCH_V1_SIZE) {  // v1 captures too
      st_sched_switch e{};
      std::memcpy(&e, d, std::min<size_t>(n, sizeof(e)));
      if (h.pid == self) {
        ++in_from_self;
        self_switches.push_back({h.ts_ns, h.cpu, false, false, e.next_tid});
      } else if (e.next_pid == self) {
        bool pre = (e.flags & ST_SWITCH_PREEMPT) != 0;
        ++(pre ? preempted_by_self : blocked_to_self);
        self_switches.push_back({h.ts_ns, h.cpu, true, pre, 0});
        ++entered_tid[std::to_string(e.next_tid)];
      }
      mine = mine || e.next_pid == self;
    } else if (h.kind == ST_EV_SCHED_WAKEUP && n >= sizeof(st_sched_wakeup)) {
      st_sched_wakeup e;
      std::memcpy(&e, d, sizeof(e));
      wakeups_of[h.tid].push_back(h.ts_ns);
      if (h.pid != self && e.waker_pid == self) {
        ++woken_by_self;
        ++woken_in_sys[std::to_string(e.wakee_sys_nr)];
        ++woken_by_tid[std::to_string(e.waker_tid)];
        constexpr int32_t kNanosleep = 35, kClockNanosleep = 230;  // x86_64
        if (e.wakee_sys_nr != kNanosleep && e.wakee_sys_nr != kClockNanosleep) ++caused_wakeups;
      }
      mine = mine || e.waker_pid == self;
    }
    if (mine && h.pid == self && h.kind != ST_EV_SCHED_SWITCH) ++subject_self;
    if (mine) {
      ++self_kind[k];
      ++self_total;
      self_ts.push_back(h.ts_ns);
    }
  });
  if (!r) {
    std::fprintf(stderr, "bench-capstat: %s\n", r.error().message.c_str());
    return 1;
  }
  // Slices of steptrace threads, per CPU in time order (see the top).
  std::stable_sort(self_switches.begin(), self_switches.end(),
                   [](const SelfSwitch& a, const SelfSwitch& b) { return a.cpu != b.cpu ? a.cpu < b.cpu : a.ts < b.ts; });
  for (auto& [tid, ts] : wakeups_of) std::sort(ts.begin(), ts.end());
  // Whether `tid` was woken in (from, to].
  auto woken_in = [&](uint32_t tid, uint64_t from, uint64_t to) {
    auto it = wakeups_of.find(tid);
    if (it == wakeups_of.end()) return false;
    auto w = std::upper_bound(it->second.begin(), it->second.end(), from);
    return w != it->second.end() && *w <= to;
  };
  uint64_t caused_switches = 0, caused_if_runnable = 0, slices_to_a_wakee = 0;
  for (size_t i = 0; i < self_switches.size(); ++i) {
    const auto& a = self_switches[i];
    if (!a.in) continue;  // left without a recorded entry: it woke on an idle CPU
    bool closed = i + 1 < self_switches.size() && self_switches[i + 1].cpu == a.cpu && !self_switches[i + 1].in;
    const uint64_t if_runnable = a.preempt ? (closed ? 2 : 1) : (closed ? 1 : 0);
    caused_if_runnable += if_runnable;
    if (!a.preempt && closed && woken_in(self_switches[i + 1].next_tid, a.ts, self_switches[i + 1].ts)) {
      ++slices_to_a_wakee;  // X -> idle -> Y without steptrace: nothing added
      continue;
    }
    caused_switches += if_runnable;
  }
  uint64_t caused = caused_switches + caused_wakeups + subject_self;
  nlohmann::json kinds = nlohmann::json::object(), mine = nlohmann::json::object();
  for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
    if (by_kind[k]) kinds[std::to_string(k)] = by_kind[k];
    if (self_kind[k]) mine[std::to_string(k)] = self_kind[k];
  }
  nlohmann::json tenths = nlohmann::json::array();
  std::vector<uint64_t> by_tenth(10, 0);
  if (last_ts > first_ts)
    for (uint64_t t : self_ts) {
      if (t < first_ts) continue;
      size_t i = static_cast<size_t>(10 * static_cast<double>(t - first_ts) / static_cast<double>(last_ts - first_ts + 1));
      ++by_tenth[std::min<size_t>(i, 9)];
    }
  for (uint64_t c : by_tenth) tenths.push_back(c);
  nlohmann::json j = {{"records", total},
                      {"self_records", self_total},
                      {"self_share", total ? double(self_total) / double(total) : 0.0},
                      {"caused_records", caused},
                      {"caused_share", total ? double(caused) / double(total) : 0.0},
                      {"caused_records_if_runnable", caused_if_runnable + caused_wakeups + subject_self},
                      {"by_kind", kinds},
                      {"self_by_kind", mine},
                      {"self_detail",
                       {{"target_preempted_by_steptrace", preempted_by_self},
                        {"target_blocked_cpu_to_steptrace", blocked_to_self},
                        {"switch_in_from_steptrace", in_from_self},
                        {"target_woken_by_steptrace", woken_by_self},
                        {"steptrace_subject", subject_self},
                        {"caused_by_slices", caused_switches},
                        {"slices_to_a_wakee", slices_to_a_wakee},
                        {"caused_wakeups", caused_wakeups},
                        {"woken_in_syscall", woken_in_sys},
                        {"woken_by_tid", woken_by_tid},
                        {"entered_tid", entered_tid}}},
                      {"self_by_tenth", tenths},
                      {"span_s", last_ts > first_ts ? static_cast<double>(last_ts - first_ts) / 1e9 : 0.0},
                      {"short_records", short_records},
                      {"truncated", r->truncated},
                      {"trailer_records", r->records}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
