// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// steals.h - planting host "steals" (CPU throttling, loader memory pressure,
// NET_RX softirq on the main thread's CPU) and reading their ground truth:
// cgroup discovery on v1, hybrid and pure v2 hosts, cgroup files, PSI, RPS,
// a loopback UDP traffic process and a tracefs instance for softirq time.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace trainsim::steals {

// Where one controller lives: `mount` is the hierarchy's mount point and
// `self` this process's cgroup in it ("/" or "/a/b").
struct Hierarchy {
	bool v2 = false;
	std::string mount;
	std::string self;
};

// Finds the hierarchy that holds controller `ctrl` ("cpu", "memory"): a v1
// mount listing it in its options, else the cgroup2 mount when its root's
// cgroup.controllers lists it. Parses /proc/self/cgroup and /proc/mounts
// (the prefix arguments let tests point at fixtures).
std::optional<Hierarchy> find_controller(const std::string &ctrl, std::string *why,
					 const std::string &proc_mounts = "/proc/mounts",
					 const std::string &proc_cgroup = "/proc/self/cgroup");
// The cgroup2 mount point (for PSI files), or "" when there is none.
std::string v2_mount(const std::string &proc_mounts = "/proc/mounts");

bool write_file(const std::string &path, const std::string &text, std::string *err);
std::string read_file(const std::string &path);
// "key value" lines (cpu.stat, memory.stat, memory.events) as a map.
std::map<std::string, int64_t> read_keyed(const std::string &path);
// PSI `total=` (µs) of the `some` or `full` line, as ns; -1 when unreadable.
int64_t psi_total_ns(const std::string &pressure_file, const std::string &line);

// Creates dir (and missing parents); false with err.
bool make_dir(const std::string &dir, std::string *err);
// Moves every task left in `dir` to its parent, then rmdir (retried a
// little while exiting tasks leave). Children first when `recursive`.
bool remove_cgroup(const std::string &dir, bool recursive = true);

// ---- per-rank cpu cgroup for throttling ----------------------------------

struct CpuCgroup {
	std::string path; // "" = none
	bool v2 = false;
	int64_t quota_us = 0;
	int64_t period_us = 0;
};

// Creates <base>/<name> with the quota. v1: under this process's own cpu
// cgroup; v2: under the root, +cpu enabled on the way.
std::optional<CpuCgroup> make_cpu_cgroup(const Hierarchy &h, const std::string &name, int64_t quota_us,
					 int64_t period_us, std::string *err);
// Moves the calling thread (v1: its tid via `tasks`) or, on v2, the calling
// process (cgroup.procs) into the cgroup.
bool join_cpu_cgroup(const CpuCgroup &cg, std::string *err);
// Cumulative throttled time of the cgroup, ns: v1 cpu.stat throttled_time;
// v2 cpu.stat.local (else cpu.stat) throttled_usec * 1000. -1: unreadable.
int64_t throttled_ns(const CpuCgroup &cg);

// ---- loader memory cgroups --------------------------------------------------

struct LoaderMem {
	std::string mem_path; // the limited memory cgroup (v1 or v2)
	bool mem_v2 = false;
	int64_t limit_bytes = 0;
	std::string psi_path;               // v2 cgroup with every loader of the rank
	std::vector<std::string> psi_loader; // one v2 cgroup per loader (children of psi_path)
};

// `mem_name`: name of the limited group under the memory hierarchy (v1: in
// this process's own cgroup; v2: at the root, +memory enabled); `psi_base`:
// where the v2 PSI groups go (the same group on pure v2).
std::optional<LoaderMem> make_loader_mem(const Hierarchy &mem, const std::string &v2root, const std::string &name,
					 int64_t limit_bytes, int workers, std::string *err);
// In a loader process: joins the limited group and its own PSI group.
bool join_loader_mem(const LoaderMem &m, int worker, std::string *err);
// Memory counters of the limited group worth recording as evidence.
std::map<std::string, int64_t> loader_mem_counters(const LoaderMem &m);

// ---- softirq: RPS, traffic, tracefs ------------------------------------------

inline constexpr const char *kRpsCpus = "/sys/class/net/lo/queues/rx-0/rps_cpus";

// Sets rps_cpus of lo's rx-0 to `cpu`'s mask; remembers the old value.
struct Rps {
	std::string old;
	bool set = false;
	bool apply(int cpu, std::string *err);
	void restore();
};

// A forked process pinned to `cpu` that receives on a UDP sink socket and
// sends `pps` datagrams of `bytes` each per second to it over 127.0.0.1.
pid_t start_traffic(int cpu, double pps, int bytes, std::string *err);
void stop_traffic(pid_t pid);

// One NET_RX softirq run: [start, end) CLOCK_MONOTONIC ns, in task `pid`'s
// context.
struct SoftirqSpan {
	int64_t start_ns;
	int64_t end_ns;
	int pid;
};

// A tracefs instance with irq:softirq_entry/exit (vec == 3) on one CPU and
// trace_clock mono; a thread reads trace_pipe and keeps the spans.
class SoftirqTrace {
public:
	~SoftirqTrace() { stop(); }
	bool start(const std::string &instance_name, int cpu, int reader_cpu, std::string *err);
	void stop();
	// Spans of task `pid` (copy); call after stop() or at any time.
	std::vector<SoftirqSpan> spans_of(int pid) const;
	std::string instance() const { return dir_; }
	uint64_t lost_lines() const { return unmatched_; }

private:
	void reader(int reader_cpu);
	std::string dir_;
	int fd_ = -1;
	std::atomic<bool> stop_{false};
	std::thread thread_;
	mutable std::mutex mu_;
	std::vector<SoftirqSpan> spans_;
	uint64_t unmatched_ = 0;
};

// Sum of the overlap of `spans` (sorted by start) with [a, b).
int64_t overlap_ns(const std::vector<SoftirqSpan> &spans, int64_t a, int64_t b);

// Parses one trace_pipe line of softirq_entry/exit: "... [cpu] flags
// 123.456789: softirq_entry: vec=3 [action=NET_RX]". Fills pid, cpu, ts (ns)
// and entry; false for other lines.
bool parse_softirq_line(const std::string &line, int *pid, int *cpu, int64_t *ts_ns, bool *entry);

// Fixed CPU work: `chunks` passes over 16 KiB (burn_cpu's inner loop), and
// its calibration (chunks per ms of thread CPU time).
uint64_t burn_chunks(uint64_t chunks);
double calibrate_chunks_per_ms();

} // namespace trainsim::steals
