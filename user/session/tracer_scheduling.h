// SPDX-License-Identifier: Apache-2.0
// steptrace's own threads run as SCHED_BATCH, and the job it launches runs
// under the policy steptrace was started with.
//
// Why: the drain wakes every --drain-ms. Under SCHED_OTHER a woken thread may
// take a CPU ahead of a runnable rank (CFS/EEVDF wake-up preemption, or the
// pick when a rank blocks), and each such slice of steptrace between two
// ranks adds switch records the job would not have had: the bulk of the
// self-caused records in `run` (bench B10). A SCHED_BATCH thread never
// preempts on a wake-up; it runs when a CPU frees or the tick says the
// running task has had its slice. Its share of the CPU is unchanged (same
// weight), so a busy session drains as much as before, a few ms later at most.
//
// Only SCHED_OTHER is changed: steptrace started under a real-time or idle
// policy (chrt) keeps it, as the operator chose. `--sched normal` keeps
// SCHED_OTHER.
#pragma once

namespace steptrace {

enum class TracerSched { batch, normal };

// Before any thread is created (threads inherit the calling thread's policy):
// the calling thread becomes SCHED_BATCH when `want` is batch and it runs
// under SCHED_OTHER. Remembers the policy it started with. Returns whether
// it changed (false where the kernel refused: steptrace then runs as it was).
bool set_tracer_sched(TracerSched want);

// In a launched job's process between fork and exec (async-signal-safe):
// the policy steptrace was started with, before set_tracer_sched.
void restore_start_sched();

}  // namespace steptrace
