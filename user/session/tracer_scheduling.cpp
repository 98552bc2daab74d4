// SPDX-License-Identifier: Apache-2.0
#include "session/tracer_scheduling.h"

#include <sched.h>

namespace steptrace {

namespace {
// Written once, before any thread or child exists; read in forked children.
bool g_changed = false;
int g_start_policy = SCHED_OTHER;
sched_param g_start_param{};
}  // namespace

bool set_tracer_sched(TracerSched want) {
  if (want != TracerSched::batch) return false;
  const int policy = ::sched_getscheduler(0);
  if (policy < 0) return false;
  // SCHED_RESET_ON_FORK may be set by whoever started us: kept as it was.
  const int reset_flag = policy & SCHED_RESET_ON_FORK;
  if ((policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER) return false;
  if (::sched_getparam(0, &g_start_param) != 0) return false;
  sched_param p{};
  p.sched_priority = 0;
  if (::sched_setscheduler(0, SCHED_BATCH | reset_flag, &p) != 0) return false;
  g_start_policy = policy;
  g_changed = true;
  return true;
}

void restore_start_sched() {
  if (g_changed) (void)::sched_setscheduler(0, g_start_policy, &g_start_param);
}

}  // namespace steptrace
