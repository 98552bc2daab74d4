// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/hang.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/clock.h"

namespace trainsim {

int hang_prepare(const Hang &h, const std::string &device_path, std::string *err)
{
	if (h.kind != HangKind::kDread)
		return -1;
	// Read-only: the daemon serves this open through the page cache, so the
	// read below waits for its page killably (D), not in FUSE's interruptible
	// request wait (S).
	int fd = open(device_path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		*err = "hang: cannot open " + device_path + " read-only: " + strerror(errno);
	return fd;
}

bool hang_now(const Hang &h, int fd, int64_t *start_ns, int64_t *end_ns, std::string *err)
{
	*start_ns = now_ns();
	if (h.kind == HangKind::kSleep) {
		int64_t until = *start_ns + h.ms() * 1000000;
		timespec ts{static_cast<time_t>(until / 1000000000), static_cast<long>(until % 1000000000)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
		}
		*end_ns = now_ns();
		return true;
	}
	// One read of the device file's only page; the daemon answers it after
	// the stall. The page is not cached: the file was opened without
	// keep_cache and nothing read it before.
	char page[4096];
	ssize_t n;
	while ((n = read(fd, page, sizeof(page))) < 0 && errno == EINTR) {
	}
	*end_ns = now_ns();
	if (n < 0) {
		*err = std::string("hang: read of the device file failed: ") + strerror(errno);
		return false;
	}
	return true;
}

} // namespace trainsim
