// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// rank.h - one training process: data loaders, the fake runtime, the step
// loop, and the ground truth of every step.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "sim/knobs.h"
#include "sim/rank_env.h"
#include "sim/steals.h"

namespace trainsim {

struct RankContext {
	Knobs knobs;
	int rank = 0;
	// The launcher variables (sim/rank_env.h): TORCHELASTIC_RUN_ID names
	// the launcher; MASTER_PORT is rank 0's host-collective listener, else
	// torchrun's default.
	pid_t launcher_pid = 0;
	uint16_t master_port = kDefaultMasterPort;
	std::string device_path;
	std::string data_dir;
	int listen_fd = -1;      // this rank's host-collective listener
	uint16_t next_port = 0;  // the next rank's listener
	uint32_t next_addr = 0;  // ... and its address (IPv4, network order)
	// --duration: rank 0 publishes the first step nobody should start, in
	// memory shared by all ranks (see rank.cpp for why it is 2 steps ahead).
	std::atomic<int64_t> *stop_step = nullptr;
	int64_t deadline_ns = 0; // 0: no deadline
	std::string truth_out;   // this rank's ground truth (one-rank truth file)
	// Host steals planted by the launcher (README "Host steals").
	steals::CpuCgroup cpu_cg;                // path "": not throttled
	std::optional<steals::LoaderMem> loader_mem; // the loaders' memory/PSI cgroups
	double work_chunks_per_ms = 0; // > 0: host_compute does fixed work (softirq)
};

// Runs the rank to completion in the calling process. Returns an exit code.
int run_rank(const RankContext &ctx);

// Builds the program bytes nrt_load gets: a trainsim_neff header plus
// padding that stands in for instruction streams.
std::string build_neff(const Knobs &k, size_t total_bytes = 256 * 1024);

} // namespace trainsim
