// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// knobs.h - every setting of a simulated training job, the named scenarios
// that plant one bottleneck each, and validation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trainsim {

enum class LoaderMode { kProcess, kThread };

// A mid-run change (--change-at-step N --change KNOB=VALUE): from step N on
// (0-based, as the truth numbers steps) the knobs that are set take these
// values, on rank `rank` only or on every rank (-1). preprocess-ms applies to
// the batches that feed step >= N (batch k feeds step k).
struct KnobChange {
	int step = -1; // -1: no change
	int rank = -1; // -1: every rank
	std::optional<double> preprocess_ms;
	std::optional<double> compute_ms;
	std::optional<double> host_ms;
	std::optional<uint64_t> copy_bytes;

	bool any_knob() const { return preprocess_ms || compute_ms || host_ms || copy_bytes; }
	bool active() const { return step >= 0 && any_knob(); }
	bool applies_to(int r) const { return active() && (rank < 0 || rank == r); }
};

// A hang (--hang-rank R --hang-at-step N): rank R's main thread blocks for
// `seconds` at the start of step N, before it asks for its batch. kSleep:
// in clock_nanosleep (state S); kDread: in read(2) on its device file, which
// the device daemon answers only after `seconds` (state D: a page-cache read
// waits killably for the page).
enum class HangKind { kSleep, kDread };
struct Hang {
	int rank = -1; // -1: no hang
	int step = -1;
	double seconds = 30;
	HangKind kind = HangKind::kSleep;

	bool active() const { return rank >= 0 && step >= 0; }
	int64_t ms() const { return active() ? static_cast<int64_t>(seconds * 1000.0 + 0.5) : 0; }
};

struct Knobs {
	std::string scenario = "compute-bound";

	// Job shape.
	int ranks = 2;
	// Simulated nodes (labels only: rank r is on node r / (ranks / nnodes),
	// which its launcher variables say; see sim/rank_env.h).
	int nnodes = 1;
	// Nodes in their own network namespaces (names under /run/netns, one
	// per node, comma-separated) with node n's ranks listening on the n-th
	// of node_addrs (IPv4): the host collective between nodes then crosses
	// whatever links those namespaces (veth + tc in tests/scripts). Empty:
	// every rank on this host's loopback.
	std::string node_netns;
	std::string node_addrs;
	// Each node's ranks (and their loaders) in their own cgroup v2 group,
	// <cgroup2 mount>/trainsim-<launcher pid>/node<N>/rank<R>, so a tracer
	// can be scoped to one node (steptrace daemon --cgroup .../node<N>).
	bool node_cgroups = false;
	int steps = 20;
	double duration_s = 0; // >0: stop after this long (steps becomes a cap)

	// Data loading (per rank). One batch = batch_samples sample files read
	// with O_DIRECT, then preprocess_ms of CPU work.
	int loader_workers = 2;
	LoaderMode loader_mode = LoaderMode::kProcess;
	int prefetch = 2;           // batches in flight per worker (PyTorch prefetch_factor)
	int batch_samples = 4;
	uint64_t sample_bytes = 256 * 1024; // multiple of 4096 (O_DIRECT)
	int dataset_samples = 64;
	double preprocess_ms = 4;   // CPU time per batch

	// Host -> device input copies per step (nrt_tensor_write calls).
	uint64_t copy_bytes = 1 << 20;
	uint64_t copy_chunk_bytes = 1 << 20; // bytes per nrt_tensor_write
	double pcie_gbps = 8.0;
	uint64_t dma_chunk_ns = 1000;       // per 64 KiB bounce chunk

	// Device execution.
	double compute_ms = 40;
	uint64_t device_cc_bytes = 4 << 20; // device all-reduce inside each execution
	double link_gbps = 50.0;
	int input_queues = 3;               // DMA_QUEUE_COPY_START kicks per execution

	// Host-side (gloo-like) ring all-reduce over loopback TCP after execute.
	uint64_t host_cc_bytes = 0;
	double net_mbit = 0; // SO_MAX_PACING_RATE per socket, Mbit/s; 0 = unlimited
	// EFA control path: 1 = the runtime sets up its endpoint through the fake
	// adapter's uverbs file at load; mr_per_step_bytes > 0 also registers
	// (and deregisters) a buffer that large in every step (a registration
	// cache that misses).
	int efa_verbs = 1;
	uint64_t mr_per_step_bytes = 0;

	// Host CPU phase after the step ("Python overhead").
	double host_ms = 2;

	// Straggler: this rank's loaders are slowdown x slower (preprocessing).
	int straggler_rank = -1;
	double straggler_slowdown = 1.0;

	// CPU contention: noise hog processes per CPU in noise_cpus (empty = all
	// online CPUs), started outside the job's process tree.
	int noise_per_cpu = 0;
	std::vector<int> noise_cpus;
	bool pin_main = false; // pin rank r's main thread to CPU r % ncpus

	// Paths.
	std::string data_dir; // empty: fresh temp dir on a real disk
	std::string dev_dir;  // empty: fresh temp dir
	std::string truth_path;
	bool verbose = false;

	// Device counters (issue 9): fake sysfs tree (neuron metrics, EFA
	// counters) under sysfs_root (empty: <run dir>/sys); the EFA port rate
	// (0: --net-mbit when set, else 100 Gbit/s); nds 0 serves no datastore
	// (ACQUIRE_NEURON_DS fails like on an old driver).
	std::string sysfs_root;
	double efa_gbit = 0;
	int nds = 1;

	// Host steals (README "Host steals").
	// CPU throttling: rank main threads (throttle_rank, -1 = all) in a cpu
	// cgroup with this quota per period (0 = off).
	double cpu_quota_ms = 0;
	double cpu_period_ms = 100;
	int throttle_rank = -1;
	// Memory pressure: each rank's loader processes in a memory cgroup
	// limited to this many MiB (0 = off); the loaders then read through the
	// page cache instead of O_DIRECT.
	int64_t loader_memory_mb = 0;
	// NET_RX softirq: UDP datagrams per second over loopback, steered by RPS
	// to the CPU of softirq_rank's (pinned) main thread (0 = off).
	double softirq_pps = 0;
	int softirq_bytes = 64;
	int softirq_rank = 0;

	// Ground truth for change-point and hang detection.
	KnobChange change;
	Hang hang;
};

const std::vector<std::string> &scenario_names();

// Knobs for a named scenario (defaults + that scenario's overrides), or
// nullopt for an unknown name.
std::optional<Knobs> scenario_knobs(const std::string &name);

// Empty when the knobs are usable, else a message naming the bad knob.
std::string validate(const Knobs &k);

// "process" / "thread".
std::optional<LoaderMode> parse_loader_mode(const std::string &s);
const char *loader_mode_name(LoaderMode m);

// The knobs --change can set, by their option names ("preprocess-ms", ...).
const std::vector<std::string> &change_knob_names();

// Adds "KNOB=VALUE[,KNOB=VALUE...]" to `c`. Returns an error message (empty
// when the spec is good): an unknown knob, a bad value, a knob given twice.
std::string parse_change(const std::string &spec, KnobChange *c);

// The knobs after the change, as rank `rank` sees them from step
// c.step on (a copy of `k` when the change does not apply to that rank).
Knobs knobs_after_change(const Knobs &k, int rank);

// The change's knobs by option name ("preprocess-ms" -> 40); empty when
// there is no change.
std::vector<std::pair<std::string, double>> change_values(const KnobChange &c);

// "sleep" / "dread".
std::optional<HangKind> parse_hang_kind(const std::string &s);
const char *hang_kind_name(HangKind k);

// "4096", "64k", "1m", "2g" (1024-based; "kb"/"kib" spellings too).
std::optional<uint64_t> parse_size(const std::string &s);

// The longest a rank can be held up in one step by the planned hang, plus
// a margin: every timeout that waits for another rank (device barrier, NQ
// poll, host all-reduce) must be at least this long.
int64_t peer_wait_timeout_ms(const Knobs &k);

// Parses "0,2-3" into {0,2,3}; nullopt on a malformed list.
std::optional<std::vector<int>> parse_cpu_list(const std::string &s);

// The knobs as a JSON object text (recorded in the ground truth).
std::string knobs_to_json(const Knobs &k);

} // namespace trainsim
