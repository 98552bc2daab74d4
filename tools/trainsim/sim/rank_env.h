// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// rank_env.h - the launcher variables a torchrun worker has (RANK,
// WORLD_SIZE, LOCAL_RANK, ..., MASTER_PORT), set in a rank and shown in its
// /proc/PID/environ, where a tracer reads a process's identity.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trainsim {

// torchrun's default rendezvous port; MASTER_PORT when there is no
// host-collective listener.
constexpr uint16_t kDefaultMasterPort = 29500;

// The node of rank r when `ranks` ranks are split evenly over `nnodes`
// nodes (nnodes divides ranks): r / (ranks / nnodes).
int node_of(int rank, int ranks, int nnodes);

// The variables, in this order: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, GROUP_WORLD_SIZE, ROLE_RANK,
// ROLE_WORLD_SIZE, ROLE_NAME, TORCHELASTIC_RUN_ID ("trainsim-<launcher>"),
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, MASTER_ADDR
// (127.0.0.1), MASTER_PORT.
std::vector<std::pair<std::string, std::string>> launcher_env(int rank, int ranks, int nnodes, pid_t launcher,
							      uint16_t master_port);

// The NUL-separated block /proc/PID/environ shows ("K=V\0K=V\0...") for an
// environment given as "K=V" strings.
std::string environ_block(const std::vector<std::string> &env);

// setenv()s each variable, then points the process's environment block
// (mm env_start..env_end) at a copy of the whole environment, so that
// /proc/PID/environ shows it too. Call it while the process has one thread,
// before it forks anything that should inherit the block. The second part
// uses prctl(PR_SET_MM_ENV_START/END) (CAP_SYS_RESOURCE), else
// PR_SET_MM_MAP (no capability; CONFIG_CHECKPOINT_RESTORE): when both fail
// it prints one warning line for rank `rank` on stderr and returns false
// (the setenv()s still hold).
bool export_launcher_env(const std::vector<std::pair<std::string, std::string>> &vars, int rank);

} // namespace trainsim
