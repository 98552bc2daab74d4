// SPDX-License-Identifier: Apache-2.0
// `steptrace daemon`: always-on tracing of every accelerator job on the host.
//
//   discovery (/proc/*/fd every --scan-ms) -> BpfTracer targets (children follow)
//   ring buffer -> flight recorder (raw bytes) + decode -> reorder -> Analysis
//   every --window seconds: analyze_job -> Prometheus registry -> fresh Analysis
//   every second: CPU budget (rusage + BPF run time) -> degradation ladder
//     (budget.h: kLevels); per-process in-kernel counters (level aggregated)
//   window start: BPF detail/aggregation switches (level sampled: detail in 1 of N windows)
//   HTTP thread (cpp-httplib): GET /metrics only (read-only; other methods 405)
//   control socket thread (unix, root-only): dump, reload, level; answered by the main loop
//   dump worker thread: compresses and writes flight-recorder captures
//   signals: HUP reload, USR1 dump.
//
// Memory is bounded however long it runs: one window of analysis state (a hard
// event cap closes a window early), a byte-capped flight recorder, capped
// process and series tables; every cap has a counter.
#pragma once

namespace steptrace::daemon {

// Exit codes: 0 after SIGTERM/SIGINT, 2 for a bad configuration, and
// kExitCannotTrace when it stopped because it could not trace (start-up
// refused, a tracer rebuild failed, the ring buffer failed), so that
// systemd's Restart=on-failure starts it again.
inline constexpr int kExitCannotTrace = 1;

// argv[0] is "daemon". Returns the process exit code.
int daemon_main(int argc, char** argv);

}  // namespace steptrace::daemon
