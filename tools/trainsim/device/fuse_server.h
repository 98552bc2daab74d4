// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// fuse_server.h - serves one regular file per simulated chip (neuron0,
// neuron1, ...) and one for the fake EFA adapter's verbs (uverbs0) from a
// FUSE mount, and routes ioctls (and, for uverbs0, writes) to them. The kernel sees a real ioctl(2) on a real file; steptrace keys it
// by st_dev/st_ino (--accel-dev).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/engine.h"
#include "device/verbs.h"

struct fuse_session;
struct fuse_req;

namespace trainsim::device {

class FuseServer {
public:
	// `verbs`: the adapter behind <dir>/uverbs0 (the EFA control path).
	FuseServer(std::vector<std::unique_ptr<Device>> &devices, VerbsAdapter &verbs);
	// Mounts on `dir` (must exist). Returns false with a message on failure.
	bool mount(const std::string &dir, std::string *err);
	// Serves until SIGINT/SIGTERM/SIGHUP (multi-threaded: a copy that sleeps
	// never holds up another rank's ioctl). Unmounts before returning.
	int run();
	~FuseServer();

	std::vector<std::unique_ptr<Device>> &devices() { return devices_; }
	VerbsAdapter &verbs() { return verbs_; }

	// A read(2) on a chip file opened read-only is answered after `ms`
	// (trainsim --hang-kind dread); 0: chips take no reads. With a stall the
	// chip files are 4 KiB long, so a read-only open reads through the page
	// cache and its reader waits killably for the page (state D).
	void set_read_stall_ms(uint64_t ms) { read_stall_ms_ = ms; }
	uint64_t read_stall_ms() const { return read_stall_ms_; }
	// Sleeps the read stall in short naps; ends early when the session exits
	// (SIGTERM) or the request is interrupted.
	void stall(fuse_req *req);

private:
	std::vector<std::unique_ptr<Device>> &devices_;
	VerbsAdapter &verbs_;
	::fuse_session *se_ = nullptr;
	bool mounted_ = false;
	bool signals_ = false;
	uint64_t read_stall_ms_ = 0;
};

} // namespace trainsim::device
