// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// fuse_server.h - serves one regular file per simulated chip (neuron0,
// neuron1, ...) from a FUSE mount, and routes ioctls on those files to the
// Devices. The kernel sees a real ioctl(2) on a real file; steptrace keys it
// by st_dev/st_ino (--accel-dev).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device/engine.h"

struct fuse_session;

namespace trainsim::device {

class FuseServer {
public:
	explicit FuseServer(std::vector<std::unique_ptr<Device>> &devices);
	// Mounts on `dir` (must exist). Returns false with a message on failure.
	bool mount(const std::string &dir, std::string *err);
	// Serves until SIGINT/SIGTERM/SIGHUP (multi-threaded: a copy that sleeps
	// never holds up another rank's ioctl). Unmounts before returning.
	int run();
	~FuseServer();

	std::vector<std::unique_ptr<Device>> &devices() { return devices_; }

private:
	std::vector<std::unique_ptr<Device>> &devices_;
	::fuse_session *se_ = nullptr;
	bool mounted_ = false;
	bool signals_ = false;
};

} // namespace trainsim::device
