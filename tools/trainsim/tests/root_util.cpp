// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "tests/root_util.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/launcher.h"

namespace fs = std::filesystem;
namespace tr = trainsim::truth;

namespace roottest {

const std::string kBin = TRAINSIM_BIN_DIR;

bool can_fuse()
{
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
		WARN("skipped: needs root and /dev/fuse");
		return false;
	}
	return true;
}

std::string temp_dir(const char *prefix)
{
	std::string t = std::string("/tmp/") + prefix + "XXXXXX";
	std::vector<char> b(t.begin(), t.end());
	b.push_back('\0');
	REQUIRE(mkdtemp(b.data()) != nullptr);
	return b.data();
}

std::string slurp(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

// fork+exec with stdout/stderr to a log file; returns the pid.
pid_t spawn(const std::vector<std::string> &args, const std::string &log)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		std::vector<char *> argv;
		for (const auto &a : args)
			argv.push_back(const_cast<char *>(a.c_str()));
		argv.push_back(nullptr);
		execv(argv[0], argv.data());
		_exit(127);
	}
	return pid;
}

int wait_exit(pid_t pid)
{
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Any FUSE mount trainsim left behind (the launcher's temp dirs or ours),
// except those in `before`: a mount an earlier, killed run left on this host
// is not this test's.
std::vector<std::string> trainsim_mounts(const std::vector<std::string> &before)
{
	std::vector<std::string> out;
	std::istringstream mi(slurp("/proc/self/mountinfo"));
	std::string line;
	while (std::getline(mi, line))
		if (line.find("trainsim") != std::string::npos && line.find("fuse") != std::string::npos &&
		    std::find(before.begin(), before.end(), line) == before.end())
			out.push_back(line);
	return out;
}

// trainsim-device on a temp dir, stopped (and unmounted) at scope exit.
Daemon::Daemon(int devices, double pcie_gbps)
{
	dir = temp_dir("trainsim-test-dev-");
	int p[2];
	REQUIRE(pipe(p) == 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		std::string fd = std::to_string(p[1]);
		std::string exe = kBin + "/trainsim-device";
		execl(exe.c_str(), exe.c_str(), "--dir", dir.c_str(), "--devices", std::to_string(devices).c_str(),
		      "--pcie-gbps", std::to_string(pcie_gbps).c_str(), "--ready-fd", fd.c_str(),
		      "--die-with-parent", nullptr);
		_exit(127);
	}
	close(p[1]);
	pollfd pf{p[0], POLLIN, 0};
	char buf[8] = {};
	bool ready = poll(&pf, 1, 10000) == 1 && read(p[0], buf, sizeof(buf)) > 0;
	close(p[0]);
	REQUIRE(ready);
}

Daemon::~Daemon()
{
	kill(pid, SIGTERM);
	wait_exit(pid);
	rmdir(dir.c_str());
}

RunResult run_trainsim(std::vector<std::string> extra)
{
	std::string dir = temp_dir("trainsim-test-run-");
	std::string truth = dir + "/truth.json", log = dir + "/log", dev = dir + "/dev";
	// Its own --dev-dir, so that the mount check below is about this job
	// (other jobs on the host may have trainsim mounts of their own).
	std::vector<std::string> args{kBin + "/trainsim", "--truth", truth, "--dev-dir", dev};
	args.insert(args.end(), extra.begin(), extra.end());
	RunResult r;
	r.code = wait_exit(spawn(args, log));
	r.log = slurp(log);
	std::string err;
	auto t = tr::load(truth, &err);
	bool mounted = trainsim::is_mount_point(dev);
	if (!mounted) // never recurse into a live mount
		fs::remove_all(dir);
	INFO(r.log);
	CHECK_FALSE(mounted);
	REQUIRE(r.code == 0);
	REQUIRE(t);
	r.truth = *t;
	return r;
}

// Structure every truth file must have, whatever the scenario.
void check_structure(const tr::Truth &t, int ranks, int steps, int loaders)
{
	REQUIRE(t.ranks == ranks);
	REQUIRE(static_cast<int>(t.rank_data.size()) == ranks);
	REQUIRE(static_cast<int>(t.devices.size()) == ranks);
	CHECK(fs::path(t.libnrt).filename() == "libnrt.so.1");
	for (const auto &r : t.rank_data) {
		CHECK(r.pid > 0);
		CHECK(r.main_tid == r.pid); // the main thread is the process's first thread
		CHECK(static_cast<int>(r.loader_pids.size()) == loaders);
		CHECK(static_cast<int>(r.loader_tids.size()) == loaders);
		for (int p : r.loader_pids)
			CHECK(p != r.pid); // processes by default, like PyTorch
		REQUIRE(static_cast<int>(r.steps.size()) == steps);
		int64_t prev_end = 0;
		for (const auto &s : r.steps) {
			CHECK(s.end_ns > s.start_ns);
			if (prev_end)
				CHECK(s.start_ns == prev_end); // steps tile the run
			prev_end = s.end_ns;
			int64_t cursor = s.start_ns, sum = 0;
			for (const auto &p : s.phases) {
				CHECK(tr::is_category(p.category));
				CHECK(p.start_ns >= cursor);
				CHECK(p.end_ns >= p.start_ns);
				CHECK(p.end_ns <= s.end_ns);
				CHECK(p.run_delay_ns >= 0);
				cursor = p.end_ns;
			}
			for (const auto &[c, v] : s.breakdown)
				sum += v;
			CHECK(sum == s.duration_ns());
			CHECK(tr::is_category(s.gating));
		}
	}
}

} // namespace roottest
