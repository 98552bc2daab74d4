// SPDX-License-Identifier: Apache-2.0
// When a CPU-only rank's collective is in flight. PyTorch DDP over gloo (and
// host collectives like it) hands each gradient bucket to a communication
// worker thread: the main thread wakes the worker, goes on with the backward
// pass, and waits for the work at the end. The all-reduce is in flight from
// that hand-over until the worker goes back to waiting for the next one -
// including the stretches in which it waits for the peer and moves no bytes,
// which the traffic bursts alone miss.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "steps/rank_steps.h"

namespace steptrace::steps {

// The union of the rank's worker episodes that moved bytes, in time order,
// disjoint. A worker is a thread of r.pid other than the main thread that
// the main thread hands work to, and whose blocked time is mostly ended by
// its own process (those hand-overs, the socket loop's word that the peer's
// bytes are in) - not the socket loop the peer's traffic wakes, a server
// thread, or a thread on a timer. An episode begins where the main
// thread wakes it and ends where it next sleeps until the main thread wakes
// it again; it counts when the worker itself sent or received in it. Empty
// when no thread is handed work that way (a job whose main thread moves the
// bytes itself).
std::vector<std::pair<uint64_t, uint64_t>> collective_in_flight(const TimelineStore& tl, const RankSteps& r);

}  // namespace steptrace::steps
