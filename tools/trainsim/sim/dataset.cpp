// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/dataset.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace trainsim {

std::string real_disk_tmp_base()
{
	struct statfs s;
	if (statfs("/tmp", &s) == 0 && s.f_type != TMPFS_MAGIC)
		return "/tmp";
	return "/var/tmp";
}

std::string sample_path(const std::string &dir, int index)
{
	char name[32];
	snprintf(name, sizeof(name), "/sample_%05d.bin", index);
	return dir + name;
}

bool prepare_dataset(const std::string &dir, int samples, uint64_t sample_bytes, std::string *err)
{
	if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
		*err = "cannot create data dir " + dir + ": " + strerror(errno);
		return false;
	}
	std::vector<char> buf(sample_bytes);
	std::mt19937_64 rng(12345);
	for (int i = 0; i < samples; i++) {
		std::string p = sample_path(dir, i);
		struct stat st;
		if (stat(p.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == sample_bytes)
			continue; // reuse: content does not matter, only that reads hit the disk
		for (size_t off = 0; off + 8 <= buf.size(); off += 8) {
			uint64_t v = rng();
			memcpy(&buf[off], &v, 8);
		}
		int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			*err = "cannot create " + p + ": " + strerror(errno);
			return false;
		}
		size_t done = 0;
		while (done < buf.size()) {
			ssize_t n = write(fd, buf.data() + done, buf.size() - done);
			if (n <= 0) {
				*err = "write " + p + ": " + strerror(errno);
				close(fd);
				return false;
			}
			done += static_cast<size_t>(n);
		}
		fdatasync(fd);
		close(fd);
	}
	// O_DIRECT needs filesystem support (tmpfs before 6.6 and some FUSE
	// filesystems refuse it); fail clearly instead of in a loader.
	int fd = open(sample_path(dir, 0).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		*err = "O_DIRECT open in " + dir + " failed (" + strerror(errno) +
		       "); put --data-dir on a disk filesystem";
		return false;
	}
	void *p = nullptr;
	if (posix_memalign(&p, 4096, 4096) != 0) {
		close(fd);
		*err = "out of memory";
		return false;
	}
	ssize_t n = pread(fd, p, 4096, 0);
	int e = errno;
	free(p);
	close(fd);
	if (n != 4096) {
		*err = "O_DIRECT read in " + dir + " failed: " + (n < 0 ? strerror(e) : "short read");
		return false;
	}
	return true;
}

} // namespace trainsim
