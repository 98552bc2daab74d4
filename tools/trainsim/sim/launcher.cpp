// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/launcher.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nrt.h"
#include "sim/clock.h"
#include "sim/collective.h"
#include "sim/dataset.h"
#include "sim/rank.h"
#include "truth.h"

namespace trainsim {

namespace fs = std::filesystem;
namespace tr = trainsim::truth;

namespace {

volatile sig_atomic_t g_stop = 0;

void on_signal(int)
{
	g_stop = 1;
}

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

class DeviceDaemon {
public:
	bool start(const Knobs &k, const std::string &dir, std::string *err)
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

	void stop()
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

private:
	pid_t pid_ = 0;
	std::string dir_;
};

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

std::string libnrt_path()
{
	Dl_info info{};
	if (dladdr(reinterpret_cast<void *>(&nrt_execute), &info) && info.dli_fname) {
		std::error_code ec;
		auto p = fs::canonical(info.dli_fname, ec);
		return ec ? std::string(info.dli_fname) : p.string();
	}
	return "";
}

void print_summary(const tr::Truth &t)
{
	fprintf(stderr, "trainsim: scenario %s, %d ranks; mean share of step per category (steps after the first):\n",
		t.scenario.c_str(), t.ranks);
	fprintf(stderr, "  rank steps step_ms");
	for (const auto &c : tr::categories())
		fprintf(stderr, " %s", c.c_str());
	fprintf(stderr, "  gating\n");
	for (const auto &r : t.rank_data) {
		std::vector<const tr::Step *> steps;
		double dur = 0;
		std::map<std::string, int> gating;
		for (const auto &s : r.steps)
			if (s.index > 0 || r.steps.size() == 1) {
				steps.push_back(&s);
				dur += static_cast<double>(s.duration_ns()) / 1e6;
				gating[s.gating]++;
			}
		auto m = tr::mean_shares(steps);
		fprintf(stderr, "  %4d %5zu %7.1f", r.rank, r.steps.size(), steps.empty() ? 0.0 : dur / steps.size());
		for (const auto &c : tr::categories())
			fprintf(stderr, " %*.1f%%", static_cast<int>(c.size()) - 1, m[c] * 100.0);
		std::string g;
		for (const auto &[c, n] : gating)
			g += (g.empty() ? "" : ",") + c + "x" + std::to_string(n);
		fprintf(stderr, "  %s\n", g.c_str());
	}
}

} // namespace

std::string self_dir()
{
	std::error_code ec;
	auto p = fs::read_symlink("/proc/self/exe", ec);
	return ec ? "." : p.parent_path().string();
}

bool is_mount_point(const std::string &dir)
{
	std::error_code ec;
	auto canon = fs::weakly_canonical(dir, ec).string();
	std::ifstream f("/proc/self/mountinfo");
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream ss(line);
		std::string id, parent, devno, root, mnt;
		ss >> id >> parent >> devno >> root >> mnt;
		if (mnt == canon || mnt == dir)
			return true;
	}
	return false;
}

int run_launcher(const Knobs &k_in)
{
	Knobs k = k_in;
	std::string err;
	struct sigaction sa{};
	sa.sa_handler = on_signal; // no SA_RESTART: waitpid returns EINTR
	sigaction(SIGINT, &sa, nullptr);
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGHUP, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);

	std::string work = make_temp_dir("/tmp", "trainsim-run-");
	if (work.empty()) {
		fprintf(stderr, "trainsim: cannot create a temp dir in /tmp: %s\n", strerror(errno));
		return 1;
	}
	bool own_data = k.data_dir.empty();
	if (own_data) {
		k.data_dir = make_temp_dir(real_disk_tmp_base(), "trainsim-data-");
		if (k.data_dir.empty()) {
			fprintf(stderr, "trainsim: cannot create a data dir: %s\n", strerror(errno));
			return 1;
		}
	}
	bool own_dev = k.dev_dir.empty();
	if (own_dev)
		k.dev_dir = work + "/dev";
	// The fake sysfs tree is rewritten on every collective and execution
	// (write + rename per counter): keep it in memory, as the real sysfs is,
	// so it costs microseconds, not a journaled disk rename per counter.
	std::string shm_sys;
	if (k.sysfs_root.empty()) {
		std::error_code shm_ec;
		if (fs::is_directory("/dev/shm", shm_ec))
			shm_sys = make_temp_dir("/dev/shm", "trainsim-sys-");
		k.sysfs_root = shm_sys.empty() ? work + "/sys" : shm_sys;
	}
	if (k.efa_gbit <= 0)
		k.efa_gbit = k.net_mbit > 0 ? k.net_mbit / 1000.0 : 100.0;
	// The device collective leaves through the same adapter: it cannot go
	// faster than the port rate the fake sysfs advertises.
	if (k.link_gbps > k.efa_gbit) {
		fprintf(stderr, "trainsim: --link-gbps %g capped to the EFA port rate %g\n", k.link_gbps, k.efa_gbit);
		k.link_gbps = k.efa_gbit;
	}
	int rc = 1;
	DeviceDaemon daemon;
	pid_t noise = -1;
	std::vector<pid_t> ranks;
	std::vector<int> listeners;
	std::atomic<int64_t> *stop_step = nullptr;
	do {
		if (mkdir(k.dev_dir.c_str(), 0755) != 0 && errno != EEXIST) {
			fprintf(stderr, "trainsim: cannot create --dev-dir %s: %s\n", k.dev_dir.c_str(), strerror(errno));
			break;
		}
		if (is_mount_point(k.dev_dir)) {
			fprintf(stderr, "trainsim: --dev-dir %s is already a mount point\n", k.dev_dir.c_str());
			break;
		}
		if (!prepare_dataset(k.data_dir, k.dataset_samples, k.sample_bytes, &err)) {
			fprintf(stderr, "trainsim: %s\n", err.c_str());
			break;
		}
		if (!daemon.start(k, k.dev_dir, &err)) {
			fprintf(stderr, "trainsim: %s\n", err.c_str());
			break;
		}
		std::vector<std::string> devices;
		for (int r = 0; r < k.ranks; r++) {
			devices.push_back(k.dev_dir + "/neuron" + std::to_string(r));
			fprintf(stderr, "trainsim: device %s\n", devices.back().c_str());
		}
		if (k.efa_verbs)
			fprintf(stderr, "trainsim: rdma device %s/uverbs0\n", k.dev_dir.c_str());
		fprintf(stderr, "trainsim: libnrt %s\n", libnrt_path().c_str());
		if (k.noise_per_cpu > 0) {
			double est = k.duration_s > 0 ? k.duration_s : k.steps * 0.5;
			noise = start_noise(k, est + 60, &err);
			if (noise < 0) {
				fprintf(stderr, "trainsim: %s\n", err.c_str());
				break;
			}
			fprintf(stderr, "trainsim: noise pid %d (%d hogs per CPU)\n", noise, k.noise_per_cpu);
			usleep(50000); // let the hogs take their CPUs first
		}
		std::vector<uint16_t> ports(static_cast<size_t>(k.ranks), 0);
		bool ok = true;
		if (k.host_cc_bytes > 0 && k.ranks > 1)
			for (int r = 0; r < k.ranks && ok; r++) {
				int fd = make_listener(&ports[r], &err);
				ok = fd >= 0;
				listeners.push_back(fd);
			}
		if (!ok) {
			fprintf(stderr, "trainsim: %s\n", err.c_str());
			break;
		}
		void *shm = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (shm == MAP_FAILED) {
			fprintf(stderr, "trainsim: mmap: %s\n", strerror(errno));
			break;
		}
		stop_step = new (shm) std::atomic<int64_t>(INT64_MAX);
		int64_t deadline = k.duration_s > 0 ? now_ns() + static_cast<int64_t>(k.duration_s * 1e9) : 0;
		for (int r = 0; r < k.ranks; r++) {
			RankContext ctx;
			ctx.knobs = k;
			ctx.rank = r;
			ctx.device_path = devices[r];
			ctx.data_dir = k.data_dir;
			if (!listeners.empty()) {
				ctx.listen_fd = listeners[r];
				ctx.next_port = ports[(r + 1) % k.ranks];
			}
			ctx.stop_step = stop_step;
			ctx.deadline_ns = deadline;
			ctx.truth_out = work + "/rank" + std::to_string(r) + ".json";
			pid_t pid = fork();
			if (pid == 0) {
				for (size_t i = 0; i < listeners.size(); i++)
					if (static_cast<int>(i) != r)
						close(listeners[i]);
				_exit(run_rank(ctx));
			}
			if (pid < 0) {
				fprintf(stderr, "trainsim: fork: %s\n", strerror(errno));
				break;
			}
			ranks.push_back(pid);
		}
		for (int fd : listeners)
			close(fd);
		listeners.clear();

		// Wait for the ranks; on a signal, stop them and clean up.
		bool all_ok = static_cast<int>(ranks.size()) == k.ranks;
		for (size_t i = 0; i < ranks.size(); i++) {
			int status = 0;
			pid_t r;
			while ((r = waitpid(ranks[i], &status, 0)) < 0 && errno == EINTR) {
				if (g_stop)
					for (pid_t p : ranks)
						kill(p, SIGTERM);
			}
			bool good = r == ranks[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
			if (!good) {
				fprintf(stderr, "trainsim: rank %zu failed (%s %d)\n", i,
					WIFSIGNALED(status) ? "signal" : "exit",
					WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
				all_ok = false;
				// A dead rank leaves the others stuck in collectives.
				for (pid_t p : ranks)
					kill(p, SIGTERM);
			}
		}
		ranks.clear();
		if (!all_ok || g_stop)
			break;

		// Merge the ranks' truth files into one.
		tr::Truth t;
		t.scenario = k.scenario;
		t.knobs_json = knobs_to_json(k);
		t.ranks = k.ranks;
		t.devices = devices;
		t.libnrt = libnrt_path();
		for (int r = 0; r < k.ranks && ok; r++) {
			auto part = tr::load(work + "/rank" + std::to_string(r) + ".json", &err);
			if (!part || part->rank_data.size() != 1) {
				fprintf(stderr, "trainsim: rank %d truth: %s\n", r, err.c_str());
				ok = false;
				break;
			}
			t.rank_data.push_back(std::move(part->rank_data[0]));
		}
		if (!ok)
			break;
		print_summary(t);
		if (!k.truth_path.empty()) {
			if (!tr::save(t, k.truth_path, &err)) {
				fprintf(stderr, "trainsim: %s\n", err.c_str());
				break;
			}
			fprintf(stderr, "trainsim: ground truth in %s\n", k.truth_path.c_str());
		}
		rc = 0;
	} while (false);

	for (pid_t p : ranks) {
		kill(p, SIGTERM);
		waitpid(p, nullptr, 0);
	}
	for (int fd : listeners)
		close(fd);
	stop_noise(noise);
	daemon.stop();
	std::error_code ec;
	// Never recurse into a mount that failed to go away.
	if (!own_dev || !is_mount_point(k.dev_dir))
		fs::remove_all(work, ec);
	if (!shm_sys.empty())
		fs::remove_all(shm_sys, ec);
	if (own_data)
		fs::remove_all(k.data_dir, ec);
	return g_stop ? 130 : rc;
}

} // namespace trainsim
