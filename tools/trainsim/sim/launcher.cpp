// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/launcher.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include "sim/node_net.h"
#include "sim/processes.h"
#include "sim/rank.h"
#include "sim/rank_env.h"
#include "sim/steals.h"
#include "truth.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>

namespace trainsim {

namespace fs = std::filesystem;
namespace tr = trainsim::truth;

namespace {

volatile sig_atomic_t g_stop = 0;

void on_signal(int)
{
	g_stop = 1;
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
		double thr = 0, sirq = 0, mem = 0, mem_some = 0;
		std::map<std::string, int> gating;
		for (const auto &s : r.steps)
			if (s.index > 0 || r.steps.size() == 1) {
				steps.push_back(&s);
				dur += static_cast<double>(s.duration_ns()) / 1e6;
				gating[s.gating]++;
				double d = s.duration_ns() > 0 ? static_cast<double>(s.duration_ns()) : 1.0;
				thr += static_cast<double>(s.throttled_ns) / d;
				sirq += static_cast<double>(s.softirq_ns) / d;
				mem += static_cast<double>(s.loader_memstall_ns) / d;
				mem_some += static_cast<double>(s.loader_memstall_some_ns) / d;
			}
		auto m = tr::mean_shares(steps);
		fprintf(stderr, "  %4d %5zu %7.1f", r.rank, r.steps.size(), steps.empty() ? 0.0 : dur / steps.size());
		for (const auto &c : tr::categories())
			fprintf(stderr, " %*.1f%%", static_cast<int>(c.size()) - 1, m[c] * 100.0);
		std::string g;
		for (const auto &[c, n] : gating)
			g += (g.empty() ? "" : ",") + c + "x" + std::to_string(n);
		fprintf(stderr, "  %s\n", g.c_str());
		if (!steps.empty() && (thr > 0 || sirq > 0 || mem > 0 || mem_some > 0)) {
			double n = static_cast<double>(steps.size());
			fprintf(stderr, "       steals (mean share of step):");
			if (thr > 0)
				fprintf(stderr, " throttled %.1f%%", thr / n * 100.0);
			if (sirq > 0)
				fprintf(stderr, " softirq %.1f%%", sirq / n * 100.0);
			if (mem > 0 || mem_some > 0)
				fprintf(stderr, " loader_memstall %.1f%% (some %.1f%%)", mem / n * 100.0, mem_some / n * 100.0);
			fprintf(stderr, "\n");
		}
	}
}

// One job: its knobs (with the temp paths filled in) and what was started.
struct Job {
	Knobs k;
	std::string work;    // run dir: the ranks' truth files, the default dev dir
	std::string shm_sys; // the fake sysfs tree when it lives in /dev/shm
	bool own_data = false;
	bool own_dev = false;
	DeviceDaemon daemon;
	pid_t noise = -1;
	std::vector<pid_t> ranks;
	std::vector<int> listeners;
	std::vector<std::string> devices;
	// Host steals (README "Host steals").
	bool plant_failed = false;
	std::vector<steals::CpuCgroup> cpu_cg; // per rank; path "" = none
	std::vector<std::optional<steals::LoaderMem>> loader_mem; // per rank
	std::vector<std::string> cgroup_tops; // trainsim-<pid> dirs to remove
	std::vector<std::string> node_cg;     // per rank: its leaf under its node's group ("" = none)
	steals::Rps rps;
	pid_t traffic = -1;
	steals::SoftirqTrace trace;
	int softirq_cpu = -1;
	double chunks_per_ms = 0;
};

// Temp dirs and the paths and rates that depend on them. False: printed.
bool prepare_paths(Job &j)
{
	Knobs &k = j.k;
	j.work = make_temp_dir("/tmp", "trainsim-run-");
	if (j.work.empty()) {
		fprintf(stderr, "trainsim: cannot create a temp dir in /tmp: %s\n", strerror(errno));
		return false;
	}
	j.own_data = k.data_dir.empty();
	if (j.own_data) {
		k.data_dir = make_temp_dir(real_disk_tmp_base(), "trainsim-data-");
		if (k.data_dir.empty()) {
			fprintf(stderr, "trainsim: cannot create a data dir: %s\n", strerror(errno));
			return false;
		}
	}
	j.own_dev = k.dev_dir.empty();
	if (j.own_dev)
		k.dev_dir = j.work + "/dev";
	// The fake sysfs tree is rewritten on every collective and execution
	// (write + rename per counter): keep it in memory, as the real sysfs is,
	// so it costs microseconds, not a journaled disk rename per counter.
	if (k.sysfs_root.empty()) {
		std::error_code shm_ec;
		if (fs::is_directory("/dev/shm", shm_ec))
			j.shm_sys = make_temp_dir("/dev/shm", "trainsim-sys-");
		k.sysfs_root = j.shm_sys.empty() ? j.work + "/sys" : j.shm_sys;
	}
	if (k.efa_gbit <= 0)
		k.efa_gbit = k.net_mbit > 0 ? k.net_mbit / 1000.0 : 100.0;
	// The device collective leaves through the same adapter: it cannot go
	// faster than the port rate the fake sysfs advertises.
	if (k.link_gbps > k.efa_gbit) {
		fprintf(stderr, "trainsim: --link-gbps %g capped to the EFA port rate %g\n", k.link_gbps, k.efa_gbit);
		k.link_gbps = k.efa_gbit;
	}
	return true;
}

// The dataset, the device daemon and the noise. False: printed.
bool start_services(Job &j)
{
	const Knobs &k = j.k;
	std::string err;
	if (mkdir(k.dev_dir.c_str(), 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "trainsim: cannot create --dev-dir %s: %s\n", k.dev_dir.c_str(), strerror(errno));
		return false;
	}
	if (is_mount_point(k.dev_dir)) {
		fprintf(stderr, "trainsim: --dev-dir %s is already a mount point\n", k.dev_dir.c_str());
		return false;
	}
	if (!prepare_dataset(k.data_dir, k.dataset_samples, k.sample_bytes, &err) ||
	    !j.daemon.start(k, k.dev_dir, &err)) {
		fprintf(stderr, "trainsim: %s\n", err.c_str());
		return false;
	}
	for (int r = 0; r < k.ranks; r++) {
		j.devices.push_back(k.dev_dir + "/neuron" + std::to_string(r));
		fprintf(stderr, "trainsim: device %s\n", j.devices.back().c_str());
	}
	if (k.efa_verbs)
		fprintf(stderr, "trainsim: rdma device %s/uverbs0\n", k.dev_dir.c_str());
	fprintf(stderr, "trainsim: libnrt %s\n", libnrt_path().c_str());
	if (k.noise_per_cpu > 0) {
		double est = (k.duration_s > 0 ? k.duration_s : k.steps * 0.5) + (k.hang.active() ? k.hang.seconds : 0);
		j.noise = start_noise(k, est + 60, &err);
		if (j.noise < 0) {
			fprintf(stderr, "trainsim: %s\n", err.c_str());
			return false;
		}
		fprintf(stderr, "trainsim: noise pid %d (%d hogs per CPU)\n", j.noise, k.noise_per_cpu);
		usleep(50000); // let the hogs take their CPUs first
	}
	return true;
}

bool plant_fail(Job &j, const std::string &what)
{
	fprintf(stderr, "trainsim: scenario %s: cannot plant its cause: %s\n", j.k.scenario.c_str(), what.c_str());
	j.plant_failed = true;
	return false;
}

// Drops the dataset's pages from the page cache (they were written by the
// launcher), so the loaders read them from disk, charged to their cgroup.
void drop_dataset_cache(const Knobs &k)
{
	for (int i = 0; i < k.dataset_samples; i++) {
		int fd = open(sample_path(k.data_dir, i).c_str(), O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
}

std::string cgroup_top_name()
{
	return "trainsim-" + std::to_string(getpid());
}

// Where rank r's own cgroups go, relative to a hierarchy's base: under its
// node's group with --node-cgroups, so that a cgroup v2 rank moved into a
// throttled or memory-limited group stays inside its node.
std::string rank_cgroup_base(const Knobs &k, int r)
{
	std::string base = cgroup_top_name();
	if (k.node_cgroups)
		base += "/node" + std::to_string(node_of(r, k.ranks, k.nnodes));
	return base;
}

// --node-cgroups: <cgroup2 mount>/trainsim-<pid>/node<N>/rank<R>, one leaf
// per rank (cgroup v2 lets only leaves hold processes once a controller is
// enabled below a group, and the steals may enable cpu/memory under the
// node). The rank joins its leaf right after fork, before its loaders
// start. False: printed.
bool make_node_cgroups(Job &j)
{
	const Knobs &k = j.k;
	j.node_cg.assign(static_cast<size_t>(k.ranks), "");
	if (!k.node_cgroups)
		return true;
	if (geteuid() != 0) {
		fprintf(stderr, "trainsim: --node-cgroups needs root\n");
		return false;
	}
	const std::string v2 = steals::v2_mount();
	if (v2.empty()) {
		fprintf(stderr, "trainsim: --node-cgroups needs a cgroup2 mount (none in /proc/mounts)\n");
		return false;
	}
	j.cgroup_tops.push_back(v2 + "/" + cgroup_top_name());
	std::string err;
	for (int r = 0; r < k.ranks; r++) {
		j.node_cg[r] = v2 + "/" + rank_cgroup_base(k, r) + "/rank" + std::to_string(r);
		if (!steals::make_dir(j.node_cg[r], &err)) {
			fprintf(stderr, "trainsim: node cgroup: %s\n", err.c_str());
			return false;
		}
	}
	for (int n = 0; n < k.nnodes; n++)
		fprintf(stderr, "trainsim: node %d's ranks in %s/%s/node%d\n", n, v2.c_str(), cgroup_top_name().c_str(), n);
	return true;
}

// The host steals: cpu cgroups per throttled rank, the loaders' memory and
// PSI cgroups, RPS + traffic + the softirq trace. False: printed, and
// plant_failed set (exit code 2).
bool plant_steals(Job &j)
{
	const Knobs &k = j.k;
	bool cpu = k.cpu_quota_ms > 0, mem = k.loader_memory_mb > 0, sirq = k.softirq_pps > 0;
	j.cpu_cg.assign(static_cast<size_t>(k.ranks), steals::CpuCgroup{});
	j.loader_mem.assign(static_cast<size_t>(k.ranks), std::nullopt);
	if (!cpu && !mem && !sirq)
		return true;
	if (geteuid() != 0)
		return plant_fail(j, "not root (cgroups, rps_cpus and tracefs need root)");
	std::string err, top = cgroup_top_name();
	auto add_top = [&](const steals::Hierarchy &h) {
		std::string base = h.v2 ? h.mount : h.mount + (h.self == "/" ? "" : h.self);
		std::string t = base + "/" + top;
		if (std::find(j.cgroup_tops.begin(), j.cgroup_tops.end(), t) == j.cgroup_tops.end())
			j.cgroup_tops.push_back(t);
	};
	if (cpu) {
		auto h = steals::find_controller("cpu", &err);
		if (!h)
			return plant_fail(j, err);
		add_top(*h);
		for (int r = 0; r < k.ranks; r++) {
			if (k.throttle_rank >= 0 && k.throttle_rank != r)
				continue;
			auto cg = steals::make_cpu_cgroup(*h, rank_cgroup_base(k, r) + "/rank" + std::to_string(r) + "-cpu",
							  static_cast<int64_t>(k.cpu_quota_ms * 1000),
							  static_cast<int64_t>(k.cpu_period_ms * 1000), &err);
			if (!cg)
				return plant_fail(j, "cpu cgroup: " + err);
			j.cpu_cg[r] = *cg;
			fprintf(stderr, "trainsim: rank %d main thread throttled in %s (%s, %g ms / %g ms)\n", r,
				cg->path.c_str(), cg->v2 ? "v2, whole rank" : "v1, main thread only", k.cpu_quota_ms,
				k.cpu_period_ms);
		}
	}
	if (mem) {
		struct statfs sf{};
		if (statfs(k.data_dir.c_str(), &sf) != 0)
			return plant_fail(j, "statfs " + k.data_dir + ": " + strerror(errno));
		if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
			return plant_fail(j, "no disk-backed filesystem for the dataset: " + k.data_dir +
						     " is tmpfs/ramfs (its pages cannot be reclaimed without swap); "
						     "use --data-dir on a disk filesystem");
		auto h = steals::find_controller("memory", &err);
		if (!h)
			return plant_fail(j, err);
		std::string v2 = steals::v2_mount();
		if (v2.empty())
			return plant_fail(j, "no cgroup2 mount for the loaders' memory.pressure (PSI)");
		add_top(*h);
		add_top(steals::Hierarchy{true, v2, "/"});
		for (int r = 0; r < k.ranks; r++) {
			auto m = steals::make_loader_mem(*h, v2, rank_cgroup_base(k, r) + "/rank" + std::to_string(r) + "-loaders",
							 k.loader_memory_mb << 20, k.loader_workers, &err);
			if (!m)
				return plant_fail(j, "loader memory cgroup: " + err);
			j.loader_mem[r] = *m;
			fprintf(stderr, "trainsim: rank %d loaders in %s (%s, %lld MiB), PSI in %s\n", r, m->mem_path.c_str(),
				m->mem_v2 ? "v2" : "v1", static_cast<long long>(k.loader_memory_mb), m->psi_path.c_str());
		}
		drop_dataset_cache(k);
	}
	if (sirq) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		if (ncpu < 2)
			return plant_fail(j, "softirq needs 2 CPUs (one for the main thread, one for the traffic)");
		j.softirq_cpu = static_cast<int>(k.softirq_rank % ncpu);
		int traffic_cpu = static_cast<int>((j.softirq_cpu + 1) % ncpu);
		// Before any traffic: the cost of the host phase's fixed work.
		j.chunks_per_ms = steals::calibrate_chunks_per_ms();
		if (!j.rps.apply(j.softirq_cpu, &err))
			return plant_fail(j, "rps_cpus: " + err);
		j.traffic = steals::start_traffic(traffic_cpu, k.softirq_pps, k.softirq_bytes, &err);
		if (j.traffic < 0)
			return plant_fail(j, err);
		if (!j.trace.start(top, j.softirq_cpu, traffic_cpu, &err))
			return plant_fail(j, "softirq trace: " + err);
		fprintf(stderr,
			"trainsim: softirq: %g pps loopback UDP from CPU %d, rps_cpus -> CPU %d (rank %d main), trace %s\n",
			k.softirq_pps, traffic_cpu, j.softirq_cpu, k.softirq_rank, j.trace.instance().c_str());
	}
	return true;
}

// Softirq truth: the traced NET_RX spans that ran while the rank's main
// thread was current, per step and per phase.
void add_softirq_truth(Job &j, tr::Rank &r)
{
	if (j.softirq_cpu < 0 || r.rank != j.k.softirq_rank)
		return;
	auto spans = j.trace.spans_of(r.main_tid);
	for (auto &s : r.steps) {
		s.softirq_ns = steals::overlap_ns(spans, s.start_ns, s.end_ns);
		for (auto &p : s.phases)
			p.softirq_ns = steals::overlap_ns(spans, p.start_ns, p.end_ns);
	}
	r.steals.softirq_cpu = j.softirq_cpu;
	r.steals.softirq_method =
		"tracefs instance: irq:softirq_entry/exit vec==3 on the main thread's CPU, trace_clock mono (us "
		"resolution), spans whose current task is the main thread";
	r.steals.softirq_pps = j.k.softirq_pps;
	r.steals.softirq_unmatched = static_cast<int64_t>(j.trace.lost_lines());
}

void cleanup_steals(Job &j)
{
	j.trace.stop();
	steals::stop_traffic(j.traffic);
	j.traffic = -1;
	j.rps.restore();
	for (const auto &t : j.cgroup_tops)
		if (!steals::remove_cgroup(t))
			fprintf(stderr, "trainsim: could not remove cgroup %s\n", t.c_str());
	j.cgroup_tops.clear();
}

// The host-collective listeners, the shared stop step, then one fork per
// rank. False: printed.
bool start_ranks(Job &j)
{
	const Knobs &k = j.k;
	std::string err;
	std::vector<uint16_t> ports(static_cast<size_t>(k.ranks), 0);
	NodeNet net;
	if (!net.open(k, &err)) {
		fprintf(stderr, "trainsim: %s\n", err.c_str());
		return false;
	}
	if (k.host_cc_bytes > 0 && k.ranks > 1)
		for (int r = 0; r < k.ranks; r++) {
			// Inside the rank's node namespace: the socket stays there.
			const int node = node_of(r, k.ranks, k.nnodes);
			int fd = net.enter(node, &err) ? make_listener(net.addr(node), &ports[r], &err) : -1;
			if (!net.home(&err) || fd < 0) {
				fprintf(stderr, "trainsim: %s\n", err.c_str());
				if (fd >= 0)
					close(fd);
				return false;
			}
			j.listeners.push_back(fd);
		}
	void *shm = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		fprintf(stderr, "trainsim: mmap: %s\n", strerror(errno));
		return false;
	}
	auto *stop_step = new (shm) std::atomic<int64_t>(INT64_MAX);
	int64_t deadline = k.duration_s > 0 ? now_ns() + static_cast<int64_t>(k.duration_s * 1e9) : 0;
	for (int r = 0; r < k.ranks; r++) {
		RankContext ctx;
		ctx.knobs = k;
		ctx.rank = r;
		ctx.launcher_pid = getpid();
		ctx.master_port = j.listeners.empty() ? kDefaultMasterPort : ports[0];
		ctx.device_path = j.devices[r];
		ctx.data_dir = k.data_dir;
		if (!j.listeners.empty()) {
			ctx.listen_fd = j.listeners[r];
			ctx.next_port = ports[(r + 1) % k.ranks];
			ctx.next_addr = net.addr(node_of((r + 1) % k.ranks, k.ranks, k.nnodes));
		}
		ctx.stop_step = stop_step;
		ctx.deadline_ns = deadline;
		ctx.truth_out = j.work + "/rank" + std::to_string(r) + ".json";
		ctx.cpu_cg = j.cpu_cg[r];
		ctx.loader_mem = j.loader_mem[r];
		if (j.softirq_cpu >= 0 && r == k.softirq_rank)
			ctx.work_chunks_per_ms = j.chunks_per_ms;
		pid_t pid = fork();
		if (pid == 0) {
			for (size_t i = 0; i < j.listeners.size(); i++)
				if (static_cast<int>(i) != r)
					close(j.listeners[i]);
			// The rank lives in its node's namespace: its connect leaves
			// from there, over the link to the next rank's node.
			if (!net.enter(node_of(r, k.ranks, k.nnodes), &err)) {
				fprintf(stderr, "trainsim: rank %d: %s\n", r, err.c_str());
				_exit(1);
			}
			// Its node's cgroup, before it starts anything (its loaders follow it).
			if (!j.node_cg[r].empty() && !steals::write_file(j.node_cg[r] + "/cgroup.procs", "0", &err)) {
				fprintf(stderr, "trainsim: rank %d: node cgroup: %s\n", r, err.c_str());
				_exit(1);
			}
			net.close_all();
			_exit(run_rank(ctx));
		}
		if (pid < 0) {
			fprintf(stderr, "trainsim: fork: %s\n", strerror(errno));
			break;
		}
		j.ranks.push_back(pid);
	}
	for (int fd : j.listeners)
		close(fd);
	j.listeners.clear();
	return static_cast<int>(j.ranks.size()) == k.ranks;
}

// Waits for the ranks; on a signal or a failed rank, stops them all. There
// is no deadline: a planned hang may hold the job up for as long as it lasts.
bool wait_ranks(Job &j)
{
	bool all_ok = true;
	for (size_t i = 0; i < j.ranks.size(); i++) {
		int status = 0;
		pid_t r;
		while ((r = waitpid(j.ranks[i], &status, 0)) < 0 && errno == EINTR) {
			if (g_stop)
				for (pid_t p : j.ranks)
					kill(p, SIGTERM);
		}
		bool good = r == j.ranks[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (!good) {
			fprintf(stderr, "trainsim: rank %zu failed (%s %d)\n", i, WIFSIGNALED(status) ? "signal" : "exit",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			all_ok = false;
			// A dead rank leaves the others stuck in collectives.
			for (pid_t p : j.ranks)
				kill(p, SIGTERM);
		}
	}
	j.ranks.clear();
	return all_ok && !g_stop;
}

// Merges the ranks' truth files into one, prints the summary and writes
// --truth. False: printed.
bool merge_truth(Job &j)
{
	const Knobs &k = j.k;
	std::string err;
	tr::Truth t;
	t.scenario = k.scenario;
	t.knobs_json = knobs_to_json(k);
	t.ranks = k.ranks;
	t.nnodes = k.nnodes;
	t.devices = j.devices;
	t.libnrt = libnrt_path();
	if (k.change.active()) {
		tr::Change c{k.change.step, k.change.rank, {}};
		for (const auto &[name, v] : change_values(k.change))
			c.knobs[name] = v;
		t.change = c;
	}
	j.trace.stop(); // every span is in
	for (int r = 0; r < k.ranks; r++) {
		auto part = tr::load(j.work + "/rank" + std::to_string(r) + ".json", &err);
		if (!part || part->rank_data.size() != 1) {
			fprintf(stderr, "trainsim: rank %d truth: %s\n", r, err.c_str());
			return false;
		}
		t.rank_data.push_back(std::move(part->rank_data[0]));
		if (!j.node_cg[r].empty())
			t.rank_data.back().node_cgroup = j.node_cg[r];
		add_softirq_truth(j, t.rank_data.back());
		if (part->hang)
			t.hang = part->hang;
	}
	print_summary(t);
	if (t.hang)
		fprintf(stderr, "trainsim: rank %d hung %.3f s at step %d (%s, tid %d)\n", t.hang->rank,
			static_cast<double>(t.hang->end_ns - t.hang->start_ns) / 1e9, t.hang->step, t.hang->kind.c_str(),
			t.hang->tid);
	if (!k.truth_path.empty()) {
		if (!tr::save(t, k.truth_path, &err)) {
			fprintf(stderr, "trainsim: %s\n", err.c_str());
			return false;
		}
		fprintf(stderr, "trainsim: ground truth in %s\n", k.truth_path.c_str());
	}
	return true;
}

void cleanup(Job &j)
{
	for (pid_t p : j.ranks) {
		kill(p, SIGTERM);
		waitpid(p, nullptr, 0);
	}
	for (int fd : j.listeners)
		close(fd);
	stop_noise(j.noise);
	cleanup_steals(j);
	j.daemon.stop();
	std::error_code ec;
	// Never recurse into a mount that failed to go away.
	if (!j.work.empty() && (!j.own_dev || !is_mount_point(j.k.dev_dir)))
		fs::remove_all(j.work, ec);
	// The daemon's datastore folder next to a --dev-dir of the user's (its
	// window files are gone with the daemon; only an empty folder goes).
	if (!j.own_dev && !j.k.dev_dir.empty())
		fs::remove(j.k.dev_dir + ".nds", ec);
	if (!j.shm_sys.empty())
		fs::remove_all(j.shm_sys, ec);
	if (j.own_data && !j.k.data_dir.empty())
		fs::remove_all(j.k.data_dir, ec);
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
	struct sigaction sa{};
	sa.sa_handler = on_signal; // no SA_RESTART: waitpid returns EINTR
	sigaction(SIGINT, &sa, nullptr);
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGHUP, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);

	Job j;
	j.k = k_in;
	if (!prepare_paths(j)) {
		cleanup(j);
		return 1;
	}
	// A rank that failed to start leaves the others to cleanup's SIGTERM.
	bool ok = start_services(j) && make_node_cgroups(j) && plant_steals(j) && start_ranks(j);
	ok = ok && wait_ranks(j);
	ok = ok && merge_truth(j);
	cleanup(j);
	return g_stop ? 130 : j.plant_failed ? 2 : ok ? 0 : 1;
}

} // namespace trainsim
