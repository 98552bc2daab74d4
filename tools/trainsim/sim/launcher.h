// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// launcher.h - trainsim's parent process, like torchrun: prepares the
// dataset, starts the fake device (FUSE daemon) and optional noise, forks
// the ranks, merges their ground truth, and cleans up (no stale mounts).
#pragma once

#include <string>

#include "sim/knobs.h"

namespace trainsim {

int run_launcher(const Knobs &knobs);

// The folder holding trainsim's binaries (dirname of /proc/self/exe).
std::string self_dir();

// True when `dir` is a mount point in /proc/self/mountinfo.
bool is_mount_point(const std::string &dir);

} // namespace trainsim
