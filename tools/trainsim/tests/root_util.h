// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// root_util.h - helpers of the [root] tests: real FUSE mounts and real
// trainsim runs. Catch2 v2 has no SKIP: without root or /dev/fuse the tests
// WARN and return.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "truth.h"

namespace roottest {

extern const std::string kBin; // the build folder with trainsim's binaries

// True with root and /dev/fuse; else WARNs (the test then returns).
bool can_fuse();
std::string temp_dir(const char *prefix);
std::string slurp(const std::string &path);
// fork+exec with stdout/stderr to a log file; returns the pid.
pid_t spawn(const std::vector<std::string> &args, const std::string &log);
// The exit code, or 128 + the signal.
int wait_exit(pid_t pid);
// Any FUSE mount trainsim left behind (the launcher's temp dirs or ours).
std::vector<std::string> trainsim_mounts(const std::vector<std::string> &before = {});

// trainsim-device on a temp dir, stopped (and unmounted) at scope exit.
struct Daemon {
	std::string dir;
	pid_t pid = -1;
	explicit Daemon(int devices, double pcie_gbps = 8.0);
	~Daemon();
	std::string dev(int i) const { return dir + "/neuron" + std::to_string(i); }
};

struct RunResult {
	int code;
	std::string log;
	trainsim::truth::Truth truth;
};

// Runs trainsim with --truth and `extra` to completion; REQUIREs success.
RunResult run_trainsim(std::vector<std::string> extra);

// Structure every truth file must have, whatever the scenario.
void check_structure(const trainsim::truth::Truth &t, int ranks, int steps, int loaders);

} // namespace roottest
