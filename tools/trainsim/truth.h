// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// truth.h - trainsim's ground truth (what really happened in every step) and
// the comparison of a tracer's answer against it. Format: README.md.
//
// Tracer tests fill a TracerResult (plain structs below) and call compare().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::truth {

// The attribution categories shared with steptrace. Exact spellings matter.
inline constexpr const char *kDeviceExecute = "device_execute";
inline constexpr const char *kDataLoading = "data_loading";
inline constexpr const char *kDmaSubmission = "dma_submission";
inline constexpr const char *kCollective = "collective";
inline constexpr const char *kHostOverhead = "host_overhead";
inline constexpr const char *kCpuContention = "cpu_contention";
inline constexpr const char *kOther = "other";
const std::vector<std::string> &categories();
bool is_category(const std::string &name);

struct Phase {
	std::string name;     // e.g. "data_wait", "tensor_write", "exec_compute"
	std::string category; // one of categories()
	int64_t start_ns = 0; // CLOCK_MONOTONIC
	int64_t end_ns = 0;
	int64_t run_delay_ns = 0; // main thread's runqueue wait inside the phase
	// True while the main thread only waits for something else to finish
	// (busy-poll on the device): run delay there does not lengthen the step.
	bool busy_wait = false;
	// Host steals inside the phase (0 unless planted; see README):
	int64_t throttled_ns = 0; // CFS throttling of the main thread's cpu cgroup
	int64_t softirq_ns = 0;   // NET_RX softirq run while the main thread was current
};

struct Step {
	int index = 0;
	int64_t start_ns = 0;
	int64_t end_ns = 0;
	std::vector<Phase> phases; // in time order, non-overlapping
	int64_t device_compute_ns = 0;    // planned device compute of the execution
	int64_t device_collective_ns = 0; // planned device collective transfer
	// What the device did, by its own timestamps (engine start -> compute end
	// -> collective done): what a datastore reports. The engine may start
	// late or overshoot the plan on a busy host.
	int64_t device_compute_actual_ns = 0;
	int64_t device_collective_actual_ns = 0;
	// Host steals in the step (0 unless planted; README "Host steals"):
	int64_t throttled_ns = 0;            // growth of the main thread's cpu cgroup throttled time
	int64_t softirq_ns = 0;              // NET_RX softirq time with the main thread current
	int64_t loader_memstall_ns = 0;      // sum over the rank's loaders of their memory PSI some
	int64_t loader_memstall_some_ns = 0; // memory PSI some of the group of all the rank's loaders
	int64_t loader_memstall_full_ns = 0; // memory PSI full of that group
	// Derived by compute_breakdown(): ns per category (sums to the step
	// duration) and the largest one.
	std::map<std::string, int64_t> breakdown;
	std::string gating;

	int64_t duration_ns() const { return end_ns - start_ns; }
};

// One call on the fake EFA adapter's uverbs file (the control path), as the
// runtime timed it around the syscall.
struct VerbCall {
	std::string name; // steptrace's names: "reg_mr", "create_qp", ...
	int64_t enter_ns = 0;
	int64_t return_ns = 0;
	uint64_t bytes = 0; // registrations: the region's length
	int ret = 0;
};

// What was planted on a rank (absent from the JSON when nothing was).
struct RankSteals {
	std::string cpu_cgroup; // "" = not throttled
	std::string cpu_cgroup_version; // "v1" (main thread only) or "v2" (whole rank process)
	int64_t cpu_quota_us = 0;
	int64_t cpu_period_us = 0;
	std::string loader_memory_cgroup; // "" = no loader memory limit
	std::string loader_memory_version;
	int64_t loader_memory_limit_bytes = 0;
	std::string loader_psi_cgroup;               // v2 group of all the loaders
	std::vector<std::string> loader_psi_cgroups; // one per loader
	// Counter growth in the limited group over the run (memory.stat keys,
	// failcnt on v1, events_* from memory.events on v2).
	std::map<std::string, int64_t> loader_memory_counters;
	int softirq_cpu = -1;        // the main thread's CPU that RPS steered NET_RX to
	std::string softirq_method;  // how softirq_ns was measured
	double softirq_pps = 0;
	int64_t softirq_unmatched = 0; // trace lines without a pair / lost-event marks

	bool any() const { return !cpu_cgroup.empty() || !loader_memory_cgroup.empty() || softirq_cpu >= 0; }
};

struct Rank {
	int rank = 0;
	int pid = 0;
	int main_tid = 0;
	int node = 0; // simulated node (trainsim --nnodes): rank / (world_size / nnodes)
	std::string node_cgroup; // --node-cgroups: the rank's leaf under its node's cgroup v2 group
	std::vector<int> loader_pids;
	std::vector<int> loader_tids;
	std::string device;
	std::vector<Step> steps;
	std::vector<VerbCall> verbs; // EFA control path, in call order
	RankSteals steals;
	// Thread CPU time spent in each named work function (sim/cpu_work.h):
	// the main thread's host work and its loaders' preprocessing, the split
	// a stack profiler's samples should show.
	std::map<std::string, int64_t> cpu_functions;
};

// A planted mid-run change (trainsim --change-at-step): from step `step` on,
// the knobs (by option name: "preprocess-ms", "compute-ms", "host-ms",
// "copy-bytes") have these values, on rank `rank` or on every rank (-1).
struct Change {
	int step = -1;
	int rank = -1;
	std::map<std::string, double> knobs;
};

// A planted hang (trainsim --hang-rank): rank `rank`'s main thread `tid` was
// blocked from start_ns to end_ns (CLOCK_MONOTONIC) at the start of step
// `step`, in clock_nanosleep ("sleep", state S) or in read(2) on its device
// file ("dread", state D).
struct Hang {
	int rank = -1;
	int step = -1;
	std::string kind;
	int pid = 0;
	int tid = 0;
	double seconds = 0; // planned
	int64_t start_ns = 0;
	int64_t end_ns = 0;
};

struct Truth {
	std::string scenario;
	std::string knobs_json; // the resolved knobs, as a JSON object text
	int ranks = 0;
	int nnodes = 1; // simulated nodes (trainsim --nnodes)
	std::vector<std::string> devices;
	std::string libnrt;
	std::vector<Rank> rank_data;
	std::optional<Change> change; // absent without --change-at-step
	std::optional<Hang> hang;     // absent without --hang-rank (or when the run ended before it)
};

// Fills step.breakdown and step.gating from the phases:
// - each phase's duration goes to its category, except that the run delay of
//   a phase that is not busy_wait goes to cpu_contention (the thread was
//   ready but another task had its CPU);
// - time between phases goes to "other".
void compute_breakdown(Step &step);

// Share (0..1) of the step per category, from breakdown.
std::map<std::string, double> shares(const Step &step);

// Mean share per category over the given steps of one rank or all ranks.
std::map<std::string, double> mean_shares(const std::vector<const Step *> &steps);

std::string to_json(const Truth &t, int indent = 1);
std::optional<Truth> from_json(const std::string &text, std::string *err);
bool save(const Truth &t, const std::string &path, std::string *err);
std::optional<Truth> load(const std::string &path, std::string *err);

// ---- comparison against a tracer -----------------------------------------

struct TracerStep {
	int64_t start_ns = 0;
	int64_t end_ns = 0;
	std::map<std::string, int64_t> category_ns;
};

struct TracerRank {
	int rank = -1; // trainsim rank if known, else -1
	int pid = 0;   // matched against Rank::pid when rank is -1
	std::vector<TracerStep> steps;
	// The main thread's runqueue waits (runnable, not running), in time
	// order: a boundary that falls in one cannot be placed from the kernel
	// (see compare). Empty: none known.
	std::vector<std::pair<int64_t, int64_t>> runnable;
};

struct TracerResult {
	std::vector<TracerRank> ranks;
};

struct CompareOptions {
	int skip_first_steps = 1; // warm-up steps left out of the averages
	// The tracer attached to a running job: only the truth steps whose
	// middle falls at or after the tracer's first counted step of the rank
	// (its step skip_first_steps) are compared.
	bool from_tracer_start = false;
};

struct Comparison {
	// Mean over matched steps of |tracer share - truth share| in percentage
	// points, per category (every category present, 0 when both agree).
	std::map<std::string, double> share_error_pp;
	double max_share_error_pp = 0; // the worst category
	int truth_steps = 0;           // counted steps (after skip) of matched ranks
	int tracer_steps = 0;          // tracer steps of matched ranks
	int matched_steps = 0;         // truth steps that found a tracer step
	bool step_count_match = false; // tracer found as many steps as there were
	double mean_step_duration_error_pct = 0; // |dur_tracer - dur_truth| / dur_truth
	double gating_agreement = 0;   // fraction of matched steps with the same gating
	std::vector<std::string> unmatched_ranks; // truth ranks with no tracer rank
	std::string summary() const;
};

// Truth steps are matched to the tracer step of the same rank that overlaps
// them most in time (a step the tracer did not find counts as unmatched).
// A step's duration error leaves out the main thread's runqueue waits
// between the tracer's boundary and the truth's: a preemption between the
// end of one step's host work and the next step's first visible call (a
// ready batch taken in user space) carries nothing that tells the kernel on
// which side of the boundary it fell, so the tracer's convention (the
// earlier step) and the truth's may differ by the whole wait.
Comparison compare(const Truth &truth, const TracerResult &tracer, const CompareOptions &opt = {});

// Time in [a, b) (either order) not covered by the sorted disjoint intervals.
int64_t uncovered_ns(int64_t a, int64_t b, const std::vector<std::pair<int64_t, int64_t>> &covered);

} // namespace trainsim::truth
