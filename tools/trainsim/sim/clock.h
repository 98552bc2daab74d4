// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// clock.h - the clocks the ground truth uses: CLOCK_MONOTONIC (what BPF's
// bpf_ktime_get_ns reads) and the calling thread's runqueue delay.
#pragma once

#include <cstdint>

namespace trainsim {

int64_t now_ns();
int64_t thread_cpu_ns();

// Reads run_delay (2nd field of /proc/thread-self/schedstat: ns this thread
// spent runnable but not running). Construct on the thread to be measured;
// the fd stays bound to that thread.
class RunDelay {
public:
	RunDelay();
	~RunDelay();
	RunDelay(const RunDelay &) = delete;
	RunDelay &operator=(const RunDelay &) = delete;
	bool ok() const { return fd_ >= 0; }
	int64_t read() const; // 0 when unavailable
private:
	int fd_ = -1;
};

// Parses the 2nd field of a schedstat line ("cpu_ns delay_ns slices").
int64_t parse_schedstat_delay(const char *text);

} // namespace trainsim
