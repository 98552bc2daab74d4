// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// processes.h - the launcher's helper processes: the fake device daemon
// (trainsim-device) and the noisy neighbour (trainsim-noise).
#pragma once

#include <sys/types.h>

#include <string>

#include "sim/knobs.h"

namespace trainsim {

// mkdtemp of <base>/<prefix>XXXXXX; "" on failure.
std::string make_temp_dir(const std::string &base, const char *prefix);

// Waits for `pid` up to timeout_ms; returns true when it was reaped.
bool wait_for(pid_t pid, int timeout_ms, int *status);

// trainsim-device serving the chips (and uverbs0) on a FUSE mount at `dir`.
class DeviceDaemon {
public:
	// Starts it and waits until the mount serves. False with *err set.
	bool start(const Knobs &k, const std::string &dir, std::string *err);
	// SIGTERM (it unmounts), SIGKILL after 5 s; then lazily unmounts a
	// mount a killed daemon left behind.
	void stop();

private:
	pid_t pid_ = 0;
	std::string dir_;
};

// Starts trainsim-noise outside the job's process tree (double fork) for at
// most max_seconds; returns its pid or -1 with *err set.
pid_t start_noise(const Knobs &k, double max_seconds, std::string *err);
void stop_noise(pid_t pid);

} // namespace trainsim
