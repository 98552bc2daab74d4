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
#include <vector>

#include "nrt.h"
#include "sim/clock.h"
#include "sim/collective.h"
#include "sim/cpu_work.h"
#include "sim/loader.h"
#include "sim/pacing.h"
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

	// Records [start, now) as one phase; rd_start is run_delay at start.
	void add(const char *name, const char *cat, int64_t start, int64_t rd_start, bool busy = false)
	{
		step.phases.push_back(tr::Phase{name, cat, start, now_ns(), rd.read() - rd_start, busy});
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

int run(const RankContext &ctx)
{
	const Knobs &k = ctx.knobs;
	prctl(PR_SET_NAME, "trainsim-main");
	tr::Rank out;
	out.rank = ctx.rank;
	out.pid = getpid();
	out.main_tid = static_cast<int>(syscall(SYS_gettid));
	out.device = ctx.device_path;

	// Loaders first, like a DataLoader iterator forking its workers; they
	// do not inherit the device fd or the main thread's pinning.
	LoaderConfig lc;
	lc.data_dir = ctx.data_dir;
	lc.rank = ctx.rank;
	lc.workers = k.loader_workers;
	lc.mode = k.loader_mode;
	lc.prefetch = k.prefetch;
	lc.batch_samples = k.batch_samples;
	lc.sample_bytes = k.sample_bytes;
	lc.dataset_samples = k.dataset_samples;
	lc.preprocess_ms = k.preprocess_ms * (ctx.rank == k.straggler_rank ? k.straggler_slowdown : 1.0);
	LoaderPool pool;
	std::string err;
	fail_if(!pool.start(lc, &err), err);
	out.loader_pids = pool.pids();
	out.loader_tids = pool.tids();
	if (k.pin_main)
		pin_to_cpu(ctx.rank);

	setenv("TRAINSIM_NEURON_DEVICE", ctx.device_path.c_str(), 1);
	setenv("TRAINSIM_SYSFS_ROOT", k.sysfs_root.c_str(), 1);
	setenv("TRAINSIM_EFA_GBIT", std::to_string(k.efa_gbit).c_str(), 1);
	if (k.efa_verbs)
		setenv("TRAINSIM_UVERBS_DEVICE", (k.dev_dir + "/uverbs0").c_str(), 1);
	else
		unsetenv("TRAINSIM_UVERBS_DEVICE");
	fail_if(nrt_init(NRT_FRAMEWORK_TYPE_PYTORCH, "2.1", "trainsim") != NRT_SUCCESS, "nrt_init failed");
	std::string neff = build_neff(k);
	nrt_model_t *model = nullptr;
	fail_if(nrt_load(neff.data(), neff.size(), 0, 1, &model) != NRT_SUCCESS, "nrt_load failed");
	nrt_tensor_t *input = nullptr, *output = nullptr;
	if (k.copy_bytes > 0)
		fail_if(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, k.copy_bytes, "input", &input) !=
				NRT_SUCCESS,
			"nrt_tensor_allocate(input) failed");
	fail_if(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4096, "loss", &output) != NRT_SUCCESS,
		"nrt_tensor_allocate(loss) failed");
	nrt_tensor_set_t *in_set = nullptr, *out_set = nullptr;
	nrt_allocate_tensor_set(&in_set);
	nrt_allocate_tensor_set(&out_set);
	if (input)
		nrt_add_tensor_to_tensor_set(in_set, "input", input);
	nrt_add_tensor_to_tensor_set(out_set, "loss", output);

	HostCollective coll;
	bool host_cc = k.host_cc_bytes >= sizeof(float) && k.ranks > 1;
	if (host_cc)
		fail_if(!coll.connect(ctx.rank, k.ranks, ctx.listen_fd, ctx.next_port, mbit_to_pacing_bytes(k.net_mbit),
				      &err),
			err);
	std::vector<float> grads(host_cc ? k.host_cc_bytes / sizeof(float) : 0);
	const float expect = static_cast<float>(k.ranks * (k.ranks + 1) / 2);
	std::vector<char> staging(k.copy_bytes);
	char loss[4096];

	Recorder rec;
	int64_t prev_end = 0;
	for (int s = 0; s < k.steps; s++) {
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
		rec.step = tr::Step{};
		tr::Step &st = rec.step;
		st.index = s;
		st.start_ns = prev_end ? prev_end : now_ns();

		// 1. Take a batch: blocks in read() until the loader's message.
		int64_t t = st.start_ns, d = rec.rd.read();
		Batch b;
		fail_if(!pool.next(static_cast<uint64_t>(s), &b, &err), err);
		if (!staging.empty()) // collate into the pinned input buffer
			memcpy(staging.data(), b.data, std::min<uint64_t>(b.bytes, staging.size()));
		pool.release(static_cast<uint64_t>(s));
		rec.add("data_wait", tr::kDataLoading, t, d);

		// 2. Inputs to the device: one MEM_BUF_COPY64 per nrt_tensor_write.
		if (input) {
			t = now_ns();
			d = rec.rd.read();
			for (uint64_t off = 0; off < k.copy_bytes; off += k.copy_chunk_bytes) {
				uint64_t n = std::min(k.copy_chunk_bytes, k.copy_bytes - off);
				fail_if(nrt_tensor_write(input, staging.data() + off, off, n) != NRT_SUCCESS,
					"nrt_tensor_write failed");
			}
			rec.add("tensor_write", tr::kDmaSubmission, t, d);
		}

		// 3. Execute (queue kicks, busy-poll, device collective inside).
		d = rec.rd.read();
		NRT_STATUS es = nrt_execute(model, in_set, out_set);
		int64_t rd_exec = rec.rd.read() - d;
		trainsim_exec_info info{};
		fail_if(trainsim_nrt_last_exec(&info) != 0, "no execution info");
		fail_if(es != NRT_SUCCESS, "nrt_execute failed with status " + std::to_string(es));
		add_exec_phases(st, info, rd_exec);
		st.device_compute_ns = static_cast<int64_t>(info.planned_compute_ns);
		st.device_collective_ns = static_cast<int64_t>(info.planned_cc_xfer_ns);
		if (info.t_compute_end_ns >= info.t_dev_start_ns && info.t_done_ns >= info.t_compute_end_ns) {
			st.device_compute_actual_ns = static_cast<int64_t>(info.t_compute_end_ns - info.t_dev_start_ns);
			st.device_collective_actual_ns = static_cast<int64_t>(info.t_done_ns - info.t_compute_end_ns);
		}

		// 4. Read the loss back (loss.item()).
		t = now_ns();
		d = rec.rd.read();
		fail_if(nrt_tensor_read(output, loss, 0, sizeof(loss)) != NRT_SUCCESS, "nrt_tensor_read failed");
		rec.add("tensor_read", tr::kDmaSubmission, t, d);

		// 4b. A registration-cache miss: the communication library registers
		// (and drops) a buffer with the adapter before the collective.
		if (k.mr_per_step_bytes > 0) {
			t = now_ns();
			d = rec.rd.read();
			fail_if(trainsim_nrt_register_buffer(k.mr_per_step_bytes) != 0, "memory registration failed");
			rec.add("mr_register", tr::kCollective, t, d);
		}

		// 5. Host all-reduce over TCP, with a correctness check on the sum.
		if (host_cc) {
			// Filling the gradient buckets is host CPU work, not the
			// collective: the network is not involved yet.
			t = now_ns();
			d = rec.rd.read();
			std::fill(grads.begin(), grads.end(), static_cast<float>(ctx.rank + 1));
			rec.add("grad_fill", tr::kHostOverhead, t, d);
			t = now_ns();
			d = rec.rd.read();
			uint64_t sent0 = coll.bytes_sent();
			fail_if(!coll.allreduce(grads.data(), grads.size(), &err), err);
			rec.add("host_allreduce", tr::kCollective, t, d);
			// A ring all-reduce receives what it sends (counted by the
			// fake adapter's flusher thread, off this thread).
			trainsim_nrt_net_traffic(coll.bytes_sent() - sent0, coll.bytes_sent() - sent0);
			fail_if(grads.front() != expect || grads.back() != expect || grads[grads.size() / 2] != expect,
				"host all-reduce produced a wrong sum");
		}

		// 6. Host CPU work between steps (optimizer bookkeeping, Python).
		if (k.host_ms > 0) {
			t = now_ns();
			d = rec.rd.read();
			burn_cpu(static_cast<int64_t>(k.host_ms * 1e6), b.data, b.bytes);
			rec.add("host_compute", tr::kHostOverhead, t, d);
		}

		st.end_ns = now_ns();
		prev_end = st.end_ns;
		tr::compute_breakdown(st);
		out.steps.push_back(std::move(st));
	}

	pool.stop();
	coll.close();
	nrt_destroy_tensor_set(&in_set);
	nrt_destroy_tensor_set(&out_set);
	nrt_tensor_free(&input);
	nrt_tensor_free(&output);
	nrt_unload(model);
	nrt_close();
	std::vector<trainsim_verb_call> calls(static_cast<size_t>(std::max(0, trainsim_nrt_verb_calls(nullptr, 0))));
	calls.resize(static_cast<size_t>(
		std::min<int>(static_cast<int>(calls.size()), trainsim_nrt_verb_calls(calls.data(), static_cast<int>(calls.size())))));
	for (const auto &c : calls)
		out.verbs.push_back(tr::VerbCall{c.name, static_cast<int64_t>(c.enter_ns), static_cast<int64_t>(c.return_ns),
						 c.bytes, c.ret});

	tr::Truth t;
	t.scenario = k.scenario;
	t.ranks = k.ranks;
	t.rank_data.push_back(std::move(out));
	fail_if(!tr::save(t, ctx.truth_out, &err), err);
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
