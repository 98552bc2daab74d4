// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/rank.h"

#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "nrt.h"
#include "sim/clock.h"
#include "sim/collective.h"
#include "sim/cpu_work.h"
#include "sim/hang.h"
#include "sim/loader.h"
#include "sim/pacing.h"
#include "sim/rank_env.h"
#include "sim_protocol.h"
#include "truth.h"

namespace trainsim {

namespace tr = trainsim::truth;

std::string build_neff(const Knobs &k, size_t total_bytes)
{
	trainsim_neff n{};
	n.magic = TRAINSIM_NEFF_MAGIC;
	n.compute_ns = static_cast<uint64_t>(k.compute_ms * 1e6);
	n.cc_bytes = k.device_cc_bytes;
	n.cc_ranks = static_cast<uint32_t>(k.ranks);
	n.input_queues = static_cast<uint32_t>(k.input_queues);
	std::string bytes(std::max(total_bytes, sizeof(n)), '\0');
	memcpy(bytes.data(), &n, sizeof(n));
	for (size_t i = sizeof(n); i < bytes.size(); i++)
		bytes[i] = static_cast<char>(i * 131);
	return bytes;
}

namespace {

struct Recorder {
	RunDelay rd;
	tr::Step step;
	// The main thread's cpu cgroup (throttled scenario): its throttled time
	// is read at every phase end; thr_last is the last reading.
	const steals::CpuCgroup *cg = nullptr;
	int64_t thr_last = 0;

	// Throttled time since the last call (0 without a cgroup). The main
	// thread reads it while running, so no throttle of its own is pending.
	int64_t take_throttled()
	{
		if (!cg)
			return 0;
		int64_t v = steals::throttled_ns(*cg);
		if (v < 0)
			return 0;
		int64_t d = std::max<int64_t>(v - thr_last, 0);
		thr_last = v;
		return d;
	}

	// Records [start, now) as one phase; rd_start is run_delay at start.
	void add(const char *name, const char *cat, int64_t start, int64_t rd_start, bool busy = false)
	{
		step.phases.push_back(tr::Phase{name, cat, start, now_ns(), rd.read() - rd_start, busy});
		step.phases.back().throttled_ns = take_throttled();
	}
};

struct Failure {
	std::string what;
};

void fail_if(bool bad, const std::string &what)
{
	if (bad)
		throw Failure{what};
}

// nrt_execute as phases: the host-side submission, the device's compute
// and collective (from the device's own timestamps in the NQ entry), and
// the completion tail (poller noticing + DMA_ACK_COMPLETED). The runtime
// reads the thread's run delay at entry, after the kicks, when the poll
// loop saw completion and at return, so the submission and the ACK get
// their measured runqueue wait. The poller's wait between the device
// finishing (t3) and noticing it (seen) is runqueue wait when the thread was
// not on a CPU then (a running poller notices within one poll): it is
// min(seen - t3, run delay accrued while polling). Without the readings
// (no schedstat), rd_total is apportioned: tail, then submit, then the rest.
void add_exec_phases(tr::Step &step, const trainsim_exec_info &e, int64_t rd_total)
{
	int64_t t0 = static_cast<int64_t>(e.t_enter_ns);
	int64_t t1 = std::max(t0, static_cast<int64_t>(e.t_kicked_ns));
	int64_t t2 = std::max(t1, static_cast<int64_t>(e.t_compute_end_ns));
	int64_t t3 = std::max(t2, static_cast<int64_t>(e.t_done_ns));
	int64_t seen = std::max(t3, static_cast<int64_t>(e.t_seen_ns));
	int64_t t4 = std::max(seen, static_cast<int64_t>(e.t_return_ns));
	int64_t rd_submit, rd_tail, left;
	if (e.have_run_delay) {
		auto d = [](uint64_t a, uint64_t b) { return b > a ? static_cast<int64_t>(b - a) : int64_t{0}; };
		int64_t rd_poll = d(e.rd_kicked_ns, e.rd_seen_ns);
		int64_t rd_notice = std::min(seen - t3, rd_poll);
		rd_submit = std::min(d(e.rd_enter_ns, e.rd_kicked_ns), t1 - t0);
		rd_tail = std::min(rd_notice + d(e.rd_seen_ns, e.rd_return_ns), t4 - t3);
		left = rd_poll - rd_notice;
	} else {
		left = std::max<int64_t>(rd_total, 0);
		auto take = [&](int64_t dur) {
			int64_t v = std::min(left, dur);
			left -= v;
			return v;
		};
		rd_tail = take(t4 - t3);
		rd_submit = take(t1 - t0);
	}
	int64_t busy = (t3 - t1) > 0 ? (t3 - t1) : 1;
	int64_t rd_compute = left * (t2 - t1) / busy;
	int64_t rd_cc = left - rd_compute;
	step.phases.push_back(tr::Phase{"exec_submit", tr::kDmaSubmission, t0, t1, rd_submit, false});
	step.phases.push_back(tr::Phase{"exec_compute", tr::kDeviceExecute, t1, t2, rd_compute, true});
	if (t3 > t2)
		step.phases.push_back(tr::Phase{"exec_collective", tr::kCollective, t2, t3, rd_cc, true});
	step.phases.push_back(tr::Phase{"exec_complete", tr::kDeviceExecute, t3, t4, rd_tail, false});
}

void pin_to_cpu(int rank)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu <= 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(static_cast<int>(rank % ncpu), &set);
	sched_setaffinity(0, sizeof(set), &set); // 0: this thread only
}

// Everything the step loop of one rank uses.
struct Job {
	explicit Job(const RankContext &c) : ctx(c), k(c.knobs), after(knobs_after_change(c.knobs, c.rank)) {}

	const RankContext &ctx;
	const Knobs &k; // the knobs before the change
	const Knobs after; // from k.change.step on (a copy of k when no change applies here)
	LoaderPool pool;
	nrt_model_t *model = nullptr;
	nrt_tensor_t *input = nullptr, *output = nullptr;
	nrt_tensor_set_t *in_set = nullptr, *out_set = nullptr;
	HostCollective coll;
	bool host_cc = false;
	std::vector<float> grads;
	float expect = 0;
	std::vector<char> staging;
	char loss[4096];
	int hang_fd = -1;
	Recorder rec;
	NamedCpu host_cpu; // the host work's CPU by named function (truth's cpu_functions)
	// Loader memory PSI totals (ns) at the last step boundary: the group of
	// all loaders (some, full) and the sum of the per-loader groups.
	int64_t psi_some = 0, psi_full = 0, psi_sum = 0;
	std::map<std::string, int64_t> mem_counters0;
	tr::Rank out;
	std::optional<tr::Hang> hang;

	const Knobs &at(int step) const { return k.change.applies_to(ctx.rank) && step >= k.change.step ? after : k; }
};

// Loaders first, like a DataLoader iterator forking its workers; they do
// not inherit the device fd or the main thread's pinning.
void start_loaders(Job &j)
{
	const Knobs &k = j.k;
	double slow = j.ctx.rank == k.straggler_rank ? k.straggler_slowdown : 1.0;
	LoaderConfig lc;
	lc.data_dir = j.ctx.data_dir;
	lc.rank = j.ctx.rank;
	lc.workers = k.loader_workers;
	lc.mode = k.loader_mode;
	lc.prefetch = k.prefetch;
	lc.batch_samples = k.batch_samples;
	lc.sample_bytes = k.sample_bytes;
	lc.dataset_samples = k.dataset_samples;
	lc.preprocess_ms = k.preprocess_ms * slow;
	lc.mem = j.ctx.loader_mem;
	lc.page_cache = j.ctx.loader_mem.has_value();
	if (k.change.applies_to(j.ctx.rank) && k.change.preprocess_ms) {
		lc.change_at_batch = static_cast<uint64_t>(k.change.step); // batch k feeds step k
		lc.preprocess_ms_after = j.after.preprocess_ms * slow;
	}
	std::string err;
	fail_if(!j.pool.start(lc, &err), err);
	j.out.loader_pids = j.pool.pids();
	j.out.loader_tids = j.pool.tids();
}

void start_runtime(Job &j)
{
	const Knobs &k = j.k;
	const RankContext &ctx = j.ctx;
	std::string err;
	setenv("TRAINSIM_NEURON_DEVICE", ctx.device_path.c_str(), 1);
	setenv("TRAINSIM_SYSFS_ROOT", k.sysfs_root.c_str(), 1);
	setenv("TRAINSIM_EFA_GBIT", std::to_string(k.efa_gbit).c_str(), 1);
	if (k.efa_verbs)
		setenv("TRAINSIM_UVERBS_DEVICE", (k.dev_dir + "/uverbs0").c_str(), 1);
	else
		unsetenv("TRAINSIM_UVERBS_DEVICE");
	// A planned hang holds the other ranks at the step's collective for as
	// long as it lasts: the runtime must not time the execution out.
	if (k.hang.active())
		setenv("NEURON_RT_EXEC_TIMEOUT", std::to_string((peer_wait_timeout_ms(k) + 999) / 1000).c_str(), 1);
	fail_if(nrt_init(NRT_FRAMEWORK_TYPE_PYTORCH, "2.1", "trainsim") != NRT_SUCCESS, "nrt_init failed");
	std::string neff = build_neff(k);
	fail_if(nrt_load(neff.data(), neff.size(), 0, 1, &j.model) != NRT_SUCCESS, "nrt_load failed");
	// With a compute change, every execution says its compute time, so the
	// descriptor copies look the same before and after the change.
	if (k.change.applies_to(ctx.rank) && k.change.compute_ms)
		trainsim_nrt_set_compute_ns(j.model, static_cast<uint64_t>(k.compute_ms * 1e6));
	uint64_t copy_max = std::max(k.copy_bytes, j.after.copy_bytes);
	if (copy_max > 0)
		fail_if(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, copy_max, "input", &j.input) != NRT_SUCCESS,
			"nrt_tensor_allocate(input) failed");
	fail_if(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4096, "loss", &j.output) != NRT_SUCCESS,
		"nrt_tensor_allocate(loss) failed");
	nrt_allocate_tensor_set(&j.in_set);
	nrt_allocate_tensor_set(&j.out_set);
	if (j.input)
		nrt_add_tensor_to_tensor_set(j.in_set, "input", j.input);
	nrt_add_tensor_to_tensor_set(j.out_set, "loss", j.output);

	j.host_cc = k.host_cc_bytes >= sizeof(float) && k.ranks > 1;
	j.coll.set_timeout_ms(static_cast<int>(peer_wait_timeout_ms(k)));
	if (j.host_cc)
		fail_if(!j.coll.connect(ctx.rank, k.ranks, ctx.listen_fd, ctx.next_addr, ctx.next_port, mbit_to_pacing_bytes(k.net_mbit),
					&err),
			err);
	j.grads.resize(j.host_cc ? k.host_cc_bytes / sizeof(float) : 0);
	j.expect = static_cast<float>(k.ranks * (k.ranks + 1) / 2);
	j.staging.resize(copy_max);
	if (k.hang.active() && k.hang.rank == ctx.rank) {
		j.hang_fd = hang_prepare(k.hang, ctx.device_path, &err);
		fail_if(k.hang.kind == HangKind::kDread && j.hang_fd < 0, err);
	}
}

// The planned hang, at the start of step s before the batch is asked for.
void hang_if_planned(Job &j, int s)
{
	const Hang &h = j.k.hang;
	if (!h.active() || h.rank != j.ctx.rank || h.step != s)
		return;
	int64_t d = j.rec.rd.read(), start = 0, end = 0;
	std::string err;
	fail_if(!hang_now(h, j.hang_fd, &start, &end, &err), err);
	j.rec.step.phases.push_back(tr::Phase{"hang", tr::kOther, start, end, j.rec.rd.read() - d, false});
	j.rec.step.phases.back().throttled_ns = j.rec.take_throttled();
	j.hang = tr::Hang{j.ctx.rank, s, hang_kind_name(h.kind), j.out.pid, j.out.main_tid, h.seconds, start, end};
}

// Steps 3 and 4: execute (queue kicks, busy-poll, device collective inside),
// then read the loss back (loss.item()).
void execute(Job &j, const Knobs &kk, int s)
{
	Recorder &rec = j.rec;
	tr::Step &st = rec.step;
	if (s == j.k.change.step && j.k.change.applies_to(j.ctx.rank) && j.k.change.compute_ms)
		trainsim_nrt_set_compute_ns(j.model, static_cast<uint64_t>(kk.compute_ms * 1e6));
	int64_t d = rec.rd.read();
	NRT_STATUS es = nrt_execute(j.model, j.in_set, j.out_set);
	int64_t rd_exec = rec.rd.read() - d;
	trainsim_exec_info info{};
	fail_if(trainsim_nrt_last_exec(&info) != 0, "no execution info");
	fail_if(es != NRT_SUCCESS, "nrt_execute failed with status " + std::to_string(es));
	size_t first_exec = st.phases.size();
	add_exec_phases(st, info, rd_exec);
	// The runtime does not read the cgroup inside nrt_execute: the call's
	// throttled time is split over its phases like their run delay (which
	// includes throttled time), the rest to the last.
	if (int64_t thr = rec.take_throttled(); thr > 0) {
		int64_t rd_sum = 0, given = 0;
		for (size_t i = first_exec; i < st.phases.size(); i++)
			rd_sum += std::max<int64_t>(st.phases[i].run_delay_ns, 0);
		for (size_t i = first_exec; i < st.phases.size(); i++) {
			int64_t v = i + 1 == st.phases.size() ? thr - given
				    : rd_sum > 0 ? thr * std::max<int64_t>(st.phases[i].run_delay_ns, 0) / rd_sum
						 : 0;
			st.phases[i].throttled_ns = v;
			given += v;
		}
	}
	st.device_compute_ns = static_cast<int64_t>(info.planned_compute_ns);
	st.device_collective_ns = static_cast<int64_t>(info.planned_cc_xfer_ns);
	if (info.t_compute_end_ns >= info.t_dev_start_ns && info.t_done_ns >= info.t_compute_end_ns) {
		st.device_compute_actual_ns = static_cast<int64_t>(info.t_compute_end_ns - info.t_dev_start_ns);
		st.device_collective_actual_ns = static_cast<int64_t>(info.t_done_ns - info.t_compute_end_ns);
	}

	int64_t t = now_ns();
	d = rec.rd.read();
	fail_if(nrt_tensor_read(j.output, j.loss, 0, sizeof(j.loss)) != NRT_SUCCESS, "nrt_tensor_read failed");
	rec.add("tensor_read", tr::kDmaSubmission, t, d);
}

// Step 5: host all-reduce over TCP, with a correctness check on the sum.
void host_allreduce(Job &j)
{
	Recorder &rec = j.rec;
	std::string err;
	// Filling the gradient buckets is host CPU work, not the collective:
	// the network is not involved yet.
	int64_t t = now_ns(), d = rec.rd.read();
	std::fill(j.grads.begin(), j.grads.end(), static_cast<float>(j.ctx.rank + 1));
	rec.add("grad_fill", tr::kHostOverhead, t, d);
	t = now_ns();
	d = rec.rd.read();
	uint64_t sent0 = j.coll.bytes_sent();
	fail_if(!j.coll.allreduce(j.grads.data(), j.grads.size(), &err), err);
	rec.add("host_allreduce", tr::kCollective, t, d);
	// A ring all-reduce receives what it sends (counted by the fake
	// adapter's flusher thread, off this thread).
	trainsim_nrt_net_traffic(j.coll.bytes_sent() - sent0, j.coll.bytes_sent() - sent0);
	fail_if(j.grads.front() != j.expect || j.grads.back() != j.expect || j.grads[j.grads.size() / 2] != j.expect,
		"host all-reduce produced a wrong sum");
}

// Loader memory stall since the previous boundary, into `st` (nullptr:
// only take the readings).
void read_loader_psi(Job &j, tr::Step *st)
{
	const auto &m = j.ctx.loader_mem;
	if (!m)
		return;
	int64_t some = steals::psi_total_ns(m->psi_path + "/memory.pressure", "some");
	int64_t full = steals::psi_total_ns(m->psi_path + "/memory.pressure", "full");
	int64_t sum = 0;
	for (const auto &p : m->psi_loader)
		sum += std::max<int64_t>(steals::psi_total_ns(p + "/memory.pressure", "some"), 0);
	if (st) {
		st->loader_memstall_some_ns = std::max<int64_t>(some - j.psi_some, 0);
		st->loader_memstall_full_ns = std::max<int64_t>(full - j.psi_full, 0);
		st->loader_memstall_ns = std::max<int64_t>(sum - j.psi_sum, 0);
	}
	j.psi_some = some;
	j.psi_full = full;
	j.psi_sum = sum;
}

// One training step; its truth is left in j.rec.step.
void run_step(Job &j, int s, int64_t start_ns)
{
	const Knobs &kk = j.at(s);
	Recorder &rec = j.rec;
	std::string err;
	rec.step = tr::Step{};
	tr::Step &st = rec.step;
	st.index = s;
	st.start_ns = start_ns;
	rec.take_throttled(); // since the previous step's end: bookkeeping only
	int64_t thr0 = rec.thr_last;
	hang_if_planned(j, s);

	// 1. Take a batch: blocks in read() until the loader's message.
	int64_t t = now_ns(), d = rec.rd.read();
	if (st.phases.empty())
		t = st.start_ns;
	Batch b;
	fail_if(!j.pool.next(static_cast<uint64_t>(s), &b, &err), err);
	if (!j.staging.empty()) // collate into the pinned input buffer
		memcpy(j.staging.data(), b.data, std::min<uint64_t>(b.bytes, j.staging.size()));
	j.pool.release(static_cast<uint64_t>(s));
	rec.add("data_wait", tr::kDataLoading, t, d);

	// 2. Inputs to the device: one MEM_BUF_COPY64 per nrt_tensor_write.
	if (kk.copy_bytes > 0) {
		t = now_ns();
		d = rec.rd.read();
		for (uint64_t off = 0; off < kk.copy_bytes; off += kk.copy_chunk_bytes) {
			uint64_t n = std::min(kk.copy_chunk_bytes, kk.copy_bytes - off);
			fail_if(nrt_tensor_write(j.input, j.staging.data() + off, off, n) != NRT_SUCCESS,
				"nrt_tensor_write failed");
		}
		rec.add("tensor_write", tr::kDmaSubmission, t, d);
	}

	execute(j, kk, s);

	// 4b. A registration-cache miss: the communication library registers
	// (and drops) a buffer with the adapter before the collective.
	if (kk.mr_per_step_bytes > 0) {
		t = now_ns();
		d = rec.rd.read();
		fail_if(trainsim_nrt_register_buffer(kk.mr_per_step_bytes) != 0, "memory registration failed");
		rec.add("mr_register", tr::kCollective, t, d);
	}
	if (j.host_cc)
		host_allreduce(j);

	// 6. Host CPU work between steps (optimizer bookkeeping, Python).
	if (kk.host_ms > 0) {
		t = now_ns();
		d = rec.rd.read();
		if (j.ctx.work_chunks_per_ms > 0) // fixed work: stolen time lengthens it
			steals::burn_chunks(static_cast<uint64_t>(kk.host_ms * j.ctx.work_chunks_per_ms + 0.5));
		else
			host_work(static_cast<int64_t>(kk.host_ms * 1e6), b.data, b.bytes, &j.host_cpu);
		rec.add("host_compute", tr::kHostOverhead, t, d);
	}
	st.end_ns = now_ns();
	rec.take_throttled();
	if (rec.cg)
		st.throttled_ns = rec.thr_last - thr0;
	read_loader_psi(j, &st);
	tr::compute_breakdown(st);
}

// Tears the runtime down and writes this rank's truth file.
void finish(Job &j)
{
	if (j.ctx.loader_mem) {
		// Before the loaders go: their counters' growth over the run.
		for (const auto &[key, v] : steals::loader_mem_counters(*j.ctx.loader_mem)) {
			auto it = j.mem_counters0.find(key);
			j.out.steals.loader_memory_counters[key] = v - (it == j.mem_counters0.end() ? 0 : it->second);
		}
	}
	for (size_t f = 0; f < 4; ++f) {
		const int64_t ns = f < 2 ? j.host_cpu.ns[f] : j.pool.preprocess_cpu().ns[f];
		if (ns > 0)
			j.out.cpu_functions[kNamedCpuFunctions[f]] = ns;
	}
	j.pool.stop();
	j.coll.close();
	if (j.hang_fd >= 0)
		close(j.hang_fd);
	nrt_destroy_tensor_set(&j.in_set);
	nrt_destroy_tensor_set(&j.out_set);
	nrt_tensor_free(&j.input);
	nrt_tensor_free(&j.output);
	nrt_unload(j.model);
	nrt_close();
	std::vector<trainsim_verb_call> calls(static_cast<size_t>(std::max(0, trainsim_nrt_verb_calls(nullptr, 0))));
	calls.resize(static_cast<size_t>(
		std::min<int>(static_cast<int>(calls.size()), trainsim_nrt_verb_calls(calls.data(), static_cast<int>(calls.size())))));
	for (const auto &c : calls)
		j.out.verbs.push_back(tr::VerbCall{c.name, static_cast<int64_t>(c.enter_ns), static_cast<int64_t>(c.return_ns),
						   c.bytes, c.ret});

	tr::Truth t;
	t.scenario = j.k.scenario;
	t.ranks = j.k.ranks;
	t.nnodes = j.k.nnodes;
	t.rank_data.push_back(std::move(j.out));
	t.hang = j.hang;
	std::string err;
	fail_if(!tr::save(t, j.ctx.truth_out, &err), err);
}

// After the loaders and the runtime's threads exist: the main thread (v1)
// or the rank (v2) joins its cpu cgroup, and the loaders' memory counters
// and PSI get their first readings.
void plant_rank_steals(Job &j)
{
	const RankContext &ctx = j.ctx;
	tr::RankSteals &st = j.out.steals;
	std::string err;
	if (!ctx.cpu_cg.path.empty()) {
		fail_if(!steals::join_cpu_cgroup(ctx.cpu_cg, &err), err);
		j.rec.cg = &ctx.cpu_cg;
		j.rec.take_throttled();
		st.cpu_cgroup = ctx.cpu_cg.path;
		st.cpu_cgroup_version = ctx.cpu_cg.v2 ? "v2" : "v1";
		st.cpu_quota_us = ctx.cpu_cg.quota_us;
		st.cpu_period_us = ctx.cpu_cg.period_us;
	}
	if (ctx.loader_mem) {
		const auto &m = *ctx.loader_mem;
		st.loader_memory_cgroup = m.mem_path;
		st.loader_memory_version = m.mem_v2 ? "v2" : "v1";
		st.loader_memory_limit_bytes = m.limit_bytes;
		st.loader_psi_cgroup = m.psi_path;
		st.loader_psi_cgroups = m.psi_loader;
		j.mem_counters0 = steals::loader_mem_counters(m);
		read_loader_psi(j, nullptr);
	}
}

int run(const RankContext &ctx)
{
	prctl(PR_SET_NAME, "trainsim-main");
	Job j(ctx);
	j.out.rank = ctx.rank;
	j.out.pid = getpid();
	j.out.main_tid = static_cast<int>(syscall(SYS_gettid));
	j.out.device = ctx.device_path;
	j.out.node = node_of(ctx.rank, j.k.ranks, j.k.nnodes);
	// Before the loaders fork, so that they inherit the environment block.
	export_launcher_env(launcher_env(ctx.rank, j.k.ranks, j.k.nnodes, ctx.launcher_pid, ctx.master_port), ctx.rank);
	start_loaders(j);
	if (j.k.pin_main)
		pin_to_cpu(ctx.rank);
	start_runtime(j);
	plant_rank_steals(j);

	int64_t prev_end = 0;
	for (int s = 0; s < j.k.steps; s++) {
		if (ctx.stop_step) {
			// Ranks never drift more than one step apart while a collective
			// links them, so "stop 2 steps after rank 0 saw the deadline" is
			// a step every rank has not started yet: nobody is left waiting
			// in a collective for a rank that already stopped.
			if (ctx.rank == 0 && ctx.deadline_ns && now_ns() >= ctx.deadline_ns &&
			    ctx.stop_step->load() == INT64_MAX)
				ctx.stop_step->store(s + 2);
			if (s >= ctx.stop_step->load())
				break;
		}
		run_step(j, s, prev_end ? prev_end : now_ns());
		prev_end = j.rec.step.end_ns;
		j.out.steps.push_back(std::move(j.rec.step));
	}
	finish(j);
	return 0;
}

} // namespace

int run_rank(const RankContext &ctx)
{
	// The launcher's handlers only set a flag; a rank must die on them.
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	try {
		return run(ctx);
	} catch (const Failure &f) {
		fprintf(stderr, "trainsim: rank %d: %s\n", ctx.rank, f.what.c_str());
		return 1;
	}
}

} // namespace trainsim
