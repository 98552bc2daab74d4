// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sim/launcher.h"

namespace trainsim {

std::string make_temp_dir(const std::string &base, const char *prefix)
{
	std::string tmpl = base + "/" + prefix + "XXXXXX";
	std::vector<char> buf(tmpl.begin(), tmpl.end());
	buf.push_back('\0');
	if (!mkdtemp(buf.data()))
		return "";
	return buf.data();
}

// Waits for `pid` up to timeout_ms; returns true when it was reaped.
bool wait_for(pid_t pid, int timeout_ms, int *status)
{
	for (int waited = 0;; waited += 10) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid || (r < 0 && errno == ECHILD))
			return true;
		if (waited >= timeout_ms)
			return false;
		usleep(10000);
	}
}

bool DeviceDaemon::start(const Knobs &k, const std::string &dir, std::string *err)
{
	dir_ = dir;
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) != 0) {
		*err = std::string("pipe: ") + strerror(errno);
		return false;
	}
	std::string exe = self_dir() + "/trainsim-device";
	pid_ = fork();
	if (pid_ < 0) {
		*err = std::string("fork: ") + strerror(errno);
		return false;
	}
	if (pid_ == 0) {
		close(ready[0]);
		int fd = dup(ready[1]); // without CLOEXEC so it survives exec
		std::vector<std::string> a{exe,
					   "--dir",
					   dir,
					   "--devices",
					   std::to_string(k.ranks),
					   "--pcie-gbps",
					   std::to_string(k.pcie_gbps),
					   "--dma-chunk-ns",
					   std::to_string(k.dma_chunk_ns),
					   "--link-gbps",
					   std::to_string(k.link_gbps),
					   "--ready-fd",
					   std::to_string(fd),
					   "--die-with-parent",
					   "--sysfs-root",
					   k.sysfs_root};
		if (k.nds)
			a.insert(a.end(), {"--nds-dir", dir + ".nds"});
		// The others wait at the device barrier while a rank hangs.
		a.insert(a.end(), {"--collective-timeout-ms", std::to_string(peer_wait_timeout_ms(k))});
		if (k.hang.active() && k.hang.kind == HangKind::kDread)
			a.insert(a.end(), {"--read-stall-ms", std::to_string(k.hang.ms())});
		if (k.verbose)
			a.push_back("--verbose");
		std::vector<char *> argv;
		for (auto &s : a)
			argv.push_back(s.data());
		argv.push_back(nullptr);
		execv(exe.c_str(), argv.data());
		fprintf(stderr, "trainsim: cannot exec %s: %s\n", exe.c_str(), strerror(errno));
		_exit(127);
	}
	close(ready[1]);
	pollfd p{ready[0], POLLIN, 0};
	char buf[16] = {};
	bool ok = poll(&p, 1, 10000) == 1 && read(ready[0], buf, sizeof(buf) - 1) > 0 &&
		  strncmp(buf, "ready", 5) == 0;
	close(ready[0]);
	if (!ok) {
		*err = "trainsim-device did not come up (see its message above)";
		stop();
		return false;
	}
	// First access runs FUSE INIT and a lookup: proves the loop serves.
	struct stat st;
	if (stat((dir + "/neuron0").c_str(), &st) != 0) {
		*err = "device file " + dir + "/neuron0 not served: " + strerror(errno);
		stop();
		return false;
	}
	return true;
}

void DeviceDaemon::stop()
{
	if (pid_ > 0) {
		int status;
		kill(pid_, SIGTERM); // libfuse's handler exits the loop and unmounts
		if (!wait_for(pid_, 5000, &status)) {
			kill(pid_, SIGKILL);
			wait_for(pid_, 5000, &status);
		}
		pid_ = 0;
	}
	// A killed daemon leaves "Transport endpoint is not connected" behind.
	if (!dir_.empty() && is_mount_point(dir_))
		umount2(dir_.c_str(), MNT_DETACH);
}

// The noisy neighbour must not be part of the job. It is started through
// a double fork, so it is reparented to init and is not in the job's
// process tree (ppid chain) while the job runs; a tracer that records every
// fork from the start would still see where it came from, so tests can start
// trainsim-noise themselves and pass --noise 0. It deliberately stays in the
// job's session: with CONFIG_SCHED_AUTOGROUP (on in Debian) a new session
// gets its own scheduling group with the weight of one task, so setsid'd
// hogs would only ever take half a CPU from the whole job, not compete with
// the main thread task-for-task like a neighbour in the same cgroup does.
pid_t start_noise(const Knobs &k, double max_seconds, std::string *err)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		*err = std::string("pipe: ") + strerror(errno);
		return -1;
	}
	std::string exe = self_dir() + "/trainsim-noise";
	pid_t mid = fork();
	if (mid == 0) {
		pid_t gc = fork();
		if (gc == 0) {
			std::string cpus;
			for (int c : k.noise_cpus)
				cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
			std::vector<std::string> a{exe, "--per-cpu", std::to_string(k.noise_per_cpu), "--duration",
						   std::to_string(max_seconds)};
			if (!cpus.empty()) {
				a.push_back("--cpus");
				a.push_back(cpus);
			}
			std::vector<char *> argv;
			for (auto &s : a)
				argv.push_back(s.data());
			argv.push_back(nullptr);
			execv(exe.c_str(), argv.data());
			_exit(127);
		}
		(void)!write(pfd[1], &gc, sizeof(gc));
		_exit(0);
	}
	close(pfd[1]);
	pid_t gc = -1;
	if (mid > 0)
		waitpid(mid, nullptr, 0);
	if (read(pfd[0], &gc, sizeof(gc)) != sizeof(gc) || gc <= 0) {
		*err = "cannot start trainsim-noise";
		gc = -1;
	}
	close(pfd[0]);
	return gc;
}

void stop_noise(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	// Not our child any more: poll until it is gone.
	for (int i = 0; i < 300 && kill(pid, 0) == 0; i++)
		usleep(10000);
}

} // namespace trainsim
