// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// hang.h - a planted hang of a rank's main thread (trainsim --hang-rank):
// it blocks in the kernel for a set time, then goes on normally.
#pragma once

#include <cstdint>
#include <string>

#include "sim/knobs.h"

namespace trainsim {

// Sets up what the hang needs before the steps start: for kDread, the
// device file opened read-only (the device daemon stalls reads on such an
// open, see device/fuse_server.h). Returns the fd (-1 for kSleep), or -1
// with *err set.
int hang_prepare(const Hang &h, const std::string &device_path, std::string *err);

// Blocks the calling thread as planned: kSleep in clock_nanosleep until
// h.seconds have passed (state S); kDread in one read(2) of `fd`, which the
// device answers after h.seconds (state D). *start_ns and *end_ns are
// CLOCK_MONOTONIC right around the blocking call(s). False with *err set
// when the read failed.
bool hang_now(const Hang &h, int fd, int64_t *start_ns, int64_t *end_ns, std::string *err);

} // namespace trainsim
