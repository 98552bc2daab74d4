// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "device/user_mem.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace trainsim::device {

namespace {
// process_vm_* may move fewer bytes than asked (page boundaries); loop.
int vm_copy(pid_t tid, void *local, uint64_t remote, size_t len, bool write)
{
	size_t done = 0;
	while (done < len) {
		iovec l{static_cast<char *>(local) + done, len - done};
		iovec r{reinterpret_cast<void *>(remote + done), len - done};
		ssize_t n = write ? process_vm_writev(tid, &l, 1, &r, 1, 0)
				  : process_vm_readv(tid, &l, 1, &r, 1, 0);
		if (n < 0)
			return errno == ESRCH ? -ESRCH : -EFAULT;
		if (n == 0)
			return -EFAULT;
		done += static_cast<size_t>(n);
	}
	return 0;
}
} // namespace

int copy_from_user(pid_t tid, void *dst, uint64_t user_addr, size_t len)
{
	if (user_addr == 0 && len)
		return -EFAULT;
	return vm_copy(tid, dst, user_addr, len, false);
}

int copy_to_user(pid_t tid, uint64_t user_addr, const void *src, size_t len)
{
	if (user_addr == 0 && len)
		return -EFAULT;
	return vm_copy(tid, const_cast<void *>(src), user_addr, len, true);
}

pid_t tgid_of(pid_t tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return tid;
	char line[256];
	pid_t tgid = tid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Tgid:", 5) == 0) {
			tgid = static_cast<pid_t>(strtol(line + 5, nullptr, 10));
			break;
		}
	}
	fclose(f);
	return tgid;
}

} // namespace trainsim::device
