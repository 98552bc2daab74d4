// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/cli.h"

#include <functional>
#include <iostream>
#include <sstream>
#include <utility>

#include <CLI/CLI.hpp>

namespace trainsim {

namespace {

const char *kExamples = R"(
EXAMPLES:
  trainsim --scenario data-bound --truth /tmp/truth.json
  trainsim --scenario collective-bound --net-mbit 800 --steps 10
  trainsim --ranks 4 --compute-ms 20 --loader-workers 1 --preprocess-ms 30
  trainsim --ranks 4 --nnodes 2 --scenario straggler
  trainsim --scenario data-bound --change-at-step 10 --change preprocess-ms=80 --change-rank 1
  trainsim --steps 30 --hang-rank 1 --hang-at-step 10 --hang-s 20 --hang-kind dread
  trainsim --scenario throttled --cpu-quota-ms 40 --throttle-rank 1
  trainsim --list-scenarios
Scenarios: compute-bound (default), data-bound, dma-bound, collective-bound,
straggler, host-bound, contention, throttled, memory-pressure, softirq
(the last three need root). Sizes accept k/m/g suffixes (1024-based).
)";

using KnobSetters = std::vector<std::pair<CLI::Option *, std::function<void(Knobs &)>>>;

// The mid-run change and the hang: ground truth for change-point and hang
// detection. No scenario sets them.
struct ChangeHangOptions {
	int change_step = -1;
	int change_rank = -1;
	std::vector<std::string> change_specs;
	int hang_rank = -1;
	int hang_step = -1;
	double hang_s = 30;
	std::string hang_kind = "sleep";
	CLI::Option *hang_s_opt = nullptr;
	CLI::Option *hang_kind_opt = nullptr;
};

void add_change_hang_options(CLI::App &app, ChangeHangOptions &o)
{
	const char *g = "Changes and hangs";
	app.add_option("--change-at-step", o.change_step,
		       "step N (0-based, the truth's step index, >= 1) from which the --change values hold")
		->group(g);
	app.add_option("--change", o.change_specs,
		       "KNOB=VALUE[,KNOB=VALUE...] from --change-at-step on; repeatable. Knobs: preprocess-ms "
		       "(the batches feeding step >= N), compute-ms, host-ms, copy-bytes")
		->expected(1)
		->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
		->group(g);
	app.add_option("--change-rank", o.change_rank, "apply the change on this rank only (-1: every rank)")->group(g);
	app.add_option("--hang-rank", o.hang_rank, "this rank's main thread hangs (with --hang-at-step)")->group(g);
	app.add_option("--hang-at-step", o.hang_step,
		       "at the start of this step (0-based), before it asks for its batch")
		->group(g);
	o.hang_s_opt = app.add_option("--hang-s", o.hang_s, "how long the hang lasts, seconds (default 30)")->group(g);
	o.hang_kind_opt = app.add_option("--hang-kind", o.hang_kind,
					 "sleep: in clock_nanosleep (state S); dread: in read(2) on the device file, "
					 "answered after --hang-s (state D)")
				  ->check(CLI::IsMember({"sleep", "dread"}))
				  ->group(g);
}

// Copies the options into the knobs; an error message for a bad --change.
std::string resolve_change_hang(const ChangeHangOptions &o, Knobs &k)
{
	k.change = KnobChange{};
	k.change.step = o.change_step;
	k.change.rank = o.change_rank;
	for (const auto &spec : o.change_specs)
		if (std::string e = parse_change(spec, &k.change); !e.empty())
			return e;
	k.hang = Hang{};
	k.hang.rank = o.hang_rank;
	k.hang.step = o.hang_step;
	k.hang.seconds = o.hang_s;
	k.hang.kind = *parse_hang_kind(o.hang_kind);
	if (o.hang_rank < 0 && o.hang_step < 0 && (o.hang_s_opt->count() || o.hang_kind_opt->count()))
		return "--hang-s and --hang-kind need --hang-rank and --hang-at-step";
	return "";
}

// Everything after parsing: scenario defaults, explicit knobs, the
// scenario-dependent defaults, then validation.
void resolve(CliOutcome &out, const Knobs &cli, const KnobSetters &knobs, const CLI::Option *straggler_opt,
	     const CLI::Option *steps_opt, const std::string &noise_cpus, const ChangeHangOptions &ch)
{
	Knobs k = *scenario_knobs(cli.scenario);
	for (auto &[opt, apply] : knobs)
		if (opt->count() > 0)
			apply(k);
	// The straggler scenario means "the last rank", whatever --ranks says.
	if (k.scenario == "straggler" && straggler_opt->count() == 0)
		k.straggler_rank = k.ranks - 1;
	// --duration alone runs until the deadline; --steps then only caps it.
	if (k.duration_s > 0 && steps_opt->count() == 0)
		k.steps = 1000000;
	auto cpus = parse_cpu_list(noise_cpus);
	std::string err = cpus ? resolve_change_hang(ch, k)
			       : "--noise-cpus: cannot parse '" + noise_cpus + "' (want e.g. 0,2-3)";
	if (cpus)
		k.noise_cpus = *cpus;
	if (err.empty())
		err = validate(k);
	if (!err.empty()) {
		out.code = 2;
		out.error = err;
		return;
	}
	out.run = true;
	out.knobs = k;
}

} // namespace

CliOutcome parse_cli(const std::vector<std::string> &args)
{
	CliOutcome out;
	CLI::App app{"trainsim: a Trainium training-host simulator with ground truth"};
	app.footer(kExamples);
	Knobs cli;        // values as typed; only options the user gave are used
	std::string loader_mode = "process";
	std::string noise_cpus;
	bool list = false;
	// (option, copy that knob from `cli` into the resolved knobs)
	KnobSetters knobs;
	auto reg = [&](CLI::Option *o, std::function<void(Knobs &)> f) { knobs.emplace_back(o, std::move(f)); return o; };
#define TS_KNOB(flag, field, desc) reg(app.add_option(flag, cli.field, desc), [&](Knobs &k) { k.field = cli.field; })
#define TS_SIZE(flag, field, desc) TS_KNOB(flag, field, desc)->transform(CLI::AsSizeValue(false))

	app.add_option("--scenario", cli.scenario, "named scenario (sets defaults for the knobs below)")
		->check(CLI::IsMember(scenario_names()))
		->group("Job");
	app.add_flag("--list-scenarios", list, "print the scenario names and exit")->group("Job");
	TS_KNOB("-r,--ranks", ranks, "ranks (processes), like torchrun --nproc-per-node")->group("Job");
	TS_KNOB("--nnodes", nnodes, "simulated nodes (torchrun --nnodes): ranks / nnodes on each")->group("Job");
	TS_KNOB("--node-netns", node_netns,
		"NS0,NS1,...: each node's ranks run in this network namespace (/run/netns/NAME; needs root)")
		->group("Job");
	TS_KNOB("--node-addrs", node_addrs, "A0,A1,...: each node's IPv4 address in its namespace (with --node-netns)")
		->group("Job");
	reg(app.add_flag("--node-cgroups", cli.node_cgroups,
			 "each node's ranks in their own cgroup v2 group, trainsim-<pid>/node<N>/rank<R> (needs root)"),
	    [&](Knobs &k) { k.node_cgroups = cli.node_cgroups; })
		->group("Job");
	CLI::Option *steps_opt = TS_KNOB("-s,--steps", steps, "training steps per rank (a cap when --duration is set)")->group("Job");
	TS_KNOB("-d,--duration", duration_s, "stop after this many seconds (0: run --steps)")->group("Job");

	TS_KNOB("--loader-workers", loader_workers, "data-loader workers per rank")->group("Data loading");
	reg(app.add_option("--loader-mode", loader_mode, "workers are processes (like PyTorch) or threads")
		    ->check(CLI::IsMember({"process", "thread"})),
	    [&](Knobs &k) { k.loader_mode = *parse_loader_mode(loader_mode); })
		->group("Data loading");
	TS_KNOB("--prefetch", prefetch, "batches in flight per worker (prefetch_factor)")->group("Data loading");
	TS_KNOB("--batch-samples", batch_samples, "sample files read per batch")->group("Data loading");
	TS_SIZE("--sample-bytes", sample_bytes, "bytes per sample file (multiple of 4096)")->group("Data loading");
	TS_KNOB("--dataset-samples", dataset_samples, "sample files in the dataset")->group("Data loading");
	TS_KNOB("--preprocess-ms", preprocess_ms, "CPU time of preprocessing per batch")->group("Data loading");
	CLI::Option *straggler_opt =
		TS_KNOB("--straggler-rank", straggler_rank, "rank whose loaders are slow (-1: none)")->group("Data loading");
	TS_KNOB("--straggler-slowdown", straggler_slowdown, "preprocessing multiplier on the straggler")
		->group("Data loading");

	TS_SIZE("--copy-bytes", copy_bytes, "host->device input bytes per step")->group("DMA");
	TS_SIZE("--copy-chunk-bytes", copy_chunk_bytes, "bytes per nrt_tensor_write (one MEM_BUF_COPY64)")
		->group("DMA");
	TS_KNOB("--pcie-gbps", pcie_gbps, "host<->device copy bandwidth, GB/s")->group("DMA");
	TS_KNOB("--dma-chunk-ns", dma_chunk_ns, "fixed cost per 64 KiB DMA bounce chunk, ns")->group("DMA");

	TS_KNOB("--compute-ms", compute_ms, "device compute per execution")->group("Device");
	TS_SIZE("--device-cc-bytes", device_cc_bytes, "device all-reduce bytes per execution (0: none)")
		->group("Device");
	TS_KNOB("--link-gbps", link_gbps, "device collective link bandwidth, GB/s")->group("Device");
	TS_KNOB("--input-queues", input_queues, "DMA queues kicked per execution")->group("Device");

	TS_SIZE("--host-cc-bytes", host_cc_bytes, "host TCP ring all-reduce bytes per step (0: none)")
		->group("Collectives");
	TS_KNOB("--net-mbit", net_mbit, "SO_MAX_PACING_RATE per socket, Mbit/s (0: unlimited)")->group("Collectives");

	TS_KNOB("--host-ms", host_ms, "host CPU time per step (Python overhead)")->group("Host");
	TS_KNOB("--noise", noise_per_cpu, "noisy-neighbour hog processes per CPU (outside the job)")->group("Host");
	reg(app.add_option("--noise-cpus", noise_cpus, "CPUs for the hogs, e.g. 0,2-3 (default: all)"),
	    [&](Knobs &) {})
		->group("Host");
	reg(app.add_flag("--pin-main", cli.pin_main, "pin rank r's main thread to CPU r % ncpus"),
	    [&](Knobs &k) { k.pin_main = cli.pin_main; })
		->group("Host");

	const char *gs = "Host steals";
	TS_KNOB("--cpu-quota-ms", cpu_quota_ms,
		"CFS quota per period of a cpu cgroup holding the main thread (v1) or rank (v2); 0: off")
		->group(gs);
	TS_KNOB("--cpu-period-ms", cpu_period_ms, "CFS period of that cgroup")->group(gs);
	TS_KNOB("--throttle-rank", throttle_rank, "rank whose main thread is throttled (-1: all)")->group(gs);
	TS_KNOB("--loader-memory-mb", loader_memory_mb,
		"memory limit of each rank's loader processes, MiB (0: off); loaders then read through the page cache")
		->group(gs);
	TS_KNOB("--softirq-pps", softirq_pps,
		"loopback UDP datagrams/s whose NET_RX softirq RPS steers to --softirq-rank's main-thread CPU (0: off)")
		->group(gs);
	TS_KNOB("--softirq-bytes", softirq_bytes, "UDP payload bytes")->group(gs);
	TS_KNOB("--softirq-rank", softirq_rank, "rank whose main thread gets the softirqs")->group(gs);

	TS_KNOB("--data-dir", data_dir, "dataset directory (default: fresh temp dir on disk, removed after)")
		->group("Paths");
	TS_KNOB("--dev-dir", dev_dir, "FUSE mount point for the devices (default: fresh temp dir)")->group("Paths");
	TS_KNOB("--truth", truth_path, "write the ground-truth JSON here")->group("Paths");
	TS_KNOB("--sysfs-root", sysfs_root, "fake sysfs tree: neuron metrics, EFA counters (default: <run dir>/sys)")
		->group("Paths");
	TS_KNOB("--efa-gbit", efa_gbit, "fake EFA port rate, Gbit/s (0: --net-mbit if set, else 100)")->group("Collectives");
	TS_KNOB("--nds", nds, "1: serve the Neuron datastore; 0: none (old driver)")->group("Device");
	TS_KNOB("--efa-verbs", efa_verbs,
		"1: the runtime sets up its EFA endpoint through <dev-dir>/uverbs0 at load (uverbs ioctls); 0: no adapter")
		->group("Collectives");
	TS_SIZE("--mr-per-step-bytes", mr_per_step_bytes,
		"register and deregister a buffer this large with the adapter in every step (0: only at load)")
		->group("Collectives");
	reg(app.add_flag("-v,--verbose", cli.verbose, "more output on stderr"), [&](Knobs &k) { k.verbose = cli.verbose; })
		->group("Paths");
#undef TS_SIZE
#undef TS_KNOB
	ChangeHangOptions ch;
	add_change_hang_options(app, ch);

	std::vector<std::string> rev(args.rbegin(), args.rend()); // CLI11 wants them reversed
	try {
		app.parse(rev);
	} catch (const CLI::CallForHelp &e) {
		std::cout << app.help();
		out.code = 0;
		return out;
	} catch (const CLI::ParseError &e) {
		out.code = 2;
		out.error = e.what();
		return out;
	}
	if (list) {
		for (const auto &n : scenario_names())
			std::cout << n << "\n";
		return out;
	}
	resolve(out, cli, knobs, straggler_opt, steps_opt, noise_cpus, ch);
	return out;
}

CliOutcome parse_cli(int argc, char **argv)
{
	std::vector<std::string> args;
	for (int i = 1; i < argc; i++)
		args.emplace_back(argv[i]);
	return parse_cli(args);
}

} // namespace trainsim
