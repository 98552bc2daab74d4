// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

namespace trainsim {

int64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

RunDelay::RunDelay() : fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}

RunDelay::~RunDelay()
{
	if (fd_ >= 0)
		close(fd_);
}

int64_t RunDelay::read() const
{
	if (fd_ < 0)
		return 0;
	char buf[128];
	ssize_t n = pread(fd_, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return parse_schedstat_delay(buf);
}

int64_t parse_schedstat_delay(const char *text)
{
	char *end;
	std::strtoll(text, &end, 10);
	if (end == text)
		return 0;
	const char *p = end;
	long long d = std::strtoll(p, &end, 10);
	return end == p ? 0 : d;
}

} // namespace trainsim
