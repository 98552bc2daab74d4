// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/knobs.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/node_net.h"

namespace trainsim {

const std::vector<std::string> &scenario_names()
{
	static const std::vector<std::string> n{"compute-bound", "data-bound", "dma-bound", "collective-bound",
						"straggler",     "host-bound", "contention", "throttled",
						"memory-pressure", "softirq"};
	return n;
}

// Each scenario starts from the balanced compute-bound defaults and moves
// one thing far enough that it gates every step on a 2-core machine. Sizes
// keep a 20-step run at a few seconds.
//
// Scenarios whose bottleneck is inside each rank (data, DMA, host,
// contention) turn the device collective off: with it, the ranks are
// lock-stepped and whichever rank is a little slower makes the others wait
// in the collective, which would blur the one thing the scenario plants.
std::optional<Knobs> scenario_knobs(const std::string &name)
{
	Knobs k;
	k.scenario = name;
	if (name == "compute-bound") {
		// defaults: 40 ms device compute, everything else small
	} else if (name == "data-bound") {
		// One loader per rank, heavy preprocessing, bigger O_DIRECT reads. No
		// device collective: ranks are not coupled, so each main thread waits
		// for its own loader (not for the other rank in a collective).
		k.loader_workers = 1;
		k.preprocess_ms = 40;
		k.device_cc_bytes = 0;
		k.batch_samples = 8;
		k.sample_bytes = 512 * 1024;
		k.compute_ms = 5;
		k.host_ms = 1;
	} else if (name == "dma-bound") {
		// Many small copies over a slow link: 384 x 64 KiB at 1 GB/s.
		k.copy_bytes = 24ull << 20;
		k.copy_chunk_bytes = 64 * 1024;
		k.pcie_gbps = 1.0;
		k.compute_ms = 8;
		k.host_ms = 1;
		k.device_cc_bytes = 0;
	} else if (name == "collective-bound") {
		// Large gradients over a paced host network: 16 MiB at 400 MB/s. No
		// device collective: the adapter is the paced 3.2 Gbit/s link, and
		// the scenario is about the host collective.
		k.host_cc_bytes = 16ull << 20;
		k.device_cc_bytes = 0;
		k.net_mbit = 3200;
		k.compute_ms = 10;
		k.host_ms = 1;
	} else if (name == "straggler") {
		// The last rank's loader is 12x slower; the others wait for it in the
		// host all-reduce. No device collective, so the wait is on sockets.
		k.loader_workers = 1;
		k.straggler_rank = k.ranks - 1;
		k.straggler_slowdown = 12;
		k.device_cc_bytes = 0;
		k.host_cc_bytes = 1 << 20;
		k.compute_ms = 15;
		k.host_ms = 1;
	} else if (name == "host-bound") {
		// Pinned so the two main threads never share a CPU (wake-affine
		// placement would otherwise stack them and turn this into contention).
		k.host_ms = 40;
		k.compute_ms = 10;
		k.pin_main = true;
		k.device_cc_bytes = 0;
	} else if (name == "contention") {
		// Host CPU phase on a pinned main thread, two hogs on every CPU.
		k.host_ms = 12;
		k.compute_ms = 10;
		k.noise_per_cpu = 2;
		k.pin_main = true;
		k.device_cc_bytes = 0;
	} else if (name == "throttled") {
		// compute-bound plus 25 ms of host work, each main thread (only the
		// thread) in its own cpu cgroup with 30 ms quota per 100 ms. Measured
		// on a 2-vCPU VM: steps 101 -> 129 ms, throttled ~36 % of the step
		// (half of it while busy-polling the device, half in host phases).
		k.host_ms = 25;
		k.pin_main = true;
		k.cpu_quota_ms = 30;
		k.cpu_period_ms = 100;
	} else if (name == "memory-pressure") {
		// One loader per rank reads 8 x 1 MiB samples per batch through the
		// page cache from a 256 MiB dataset, in a memory cgroup of 18 MiB
		// (8 MiB of it the loader's shared-memory batch slot): it reclaims
		// on almost every read, and the main thread waits for its batches.
		// The device's 2 ms keep the job data-bound wherever the reclaim bites
		// less: with 5 ms, one CI host's truth had data loading 2.7 pp ahead
		// of the device, another's the device ahead (a verdict on a tie).
		// Measured on a 2-vCPU VM: ~12 ms steps, data_loading 42-57 %, device
		// 18-23 %.
		k.loader_workers = 1;
		k.prefetch = 1;
		k.sample_bytes = 1 << 20;
		k.batch_samples = 8;
		k.dataset_samples = 256;
		k.preprocess_ms = 1;
		k.loader_memory_mb = 18;
		k.compute_ms = 2;
		k.host_ms = 1;
		k.device_cc_bytes = 0;
	} else if (name == "softirq") {
		// One rank, main thread pinned to CPU 0; loopback UDP at 150 kpps
		// steered by RPS to CPU 0, sent from CPU 1. The host phase does a
		// fixed amount of work, so softirq time stolen there lengthens it.
		k.ranks = 1;
		k.host_ms = 20;
		k.compute_ms = 10;
		k.pin_main = true;
		k.device_cc_bytes = 0;
		k.softirq_pps = 150000;
	} else {
		return std::nullopt;
	}
	return k;
}

std::optional<LoaderMode> parse_loader_mode(const std::string &s)
{
	if (s == "process")
		return LoaderMode::kProcess;
	if (s == "thread")
		return LoaderMode::kThread;
	return std::nullopt;
}

const char *loader_mode_name(LoaderMode m)
{
	return m == LoaderMode::kProcess ? "process" : "thread";
}

std::optional<std::vector<int>> parse_cpu_list(const std::string &s)
{
	std::vector<int> out;
	if (s.empty())
		return out;
	std::stringstream ss(s);
	std::string item;
	while (std::getline(ss, item, ',')) {
		if (item.empty())
			return std::nullopt;
		char *end;
		long a = std::strtol(item.c_str(), &end, 10);
		long b = a;
		if (end == item.c_str() || a < 0)
			return std::nullopt;
		if (*end == '-') {
			const char *p = end + 1;
			b = std::strtol(p, &end, 10);
			if (end == p || b < a)
				return std::nullopt;
		}
		if (*end != '\0' || b > 4095)
			return std::nullopt;
		for (long c = a; c <= b; c++)
			out.push_back(static_cast<int>(c));
	}
	return out;
}

const std::vector<std::string> &change_knob_names()
{
	static const std::vector<std::string> n{"preprocess-ms", "compute-ms", "host-ms", "copy-bytes"};
	return n;
}

std::optional<uint64_t> parse_size(const std::string &s)
{
	if (s.empty() || !isdigit(static_cast<unsigned char>(s[0])))
		return std::nullopt;
	char *end;
	errno = 0;
	unsigned long long v = std::strtoull(s.c_str(), &end, 10);
	if (errno)
		return std::nullopt;
	std::string unit(end);
	for (auto &ch : unit)
		ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
	int shift = 0;
	if (!unit.empty()) {
		const std::string units = "kmg";
		size_t u = units.find(unit[0]);
		if (u == std::string::npos)
			return std::nullopt;
		std::string rest = unit.substr(1);
		if (!rest.empty() && rest != "b" && rest != "ib")
			return std::nullopt;
		shift = 10 * static_cast<int>(u + 1);
	}
	if (v > (UINT64_MAX >> shift))
		return std::nullopt;
	return static_cast<uint64_t>(v) << shift;
}

namespace {

std::optional<double> parse_ms(const std::string &s)
{
	char *end;
	double v = std::strtod(s.c_str(), &end);
	if (s.empty() || *end != '\0' || !std::isfinite(v))
		return std::nullopt;
	return v;
}

} // namespace

std::string parse_change(const std::string &spec, KnobChange *c)
{
	std::stringstream ss(spec);
	std::string item;
	bool any = false;
	while (std::getline(ss, item, ',')) {
		if (item.empty())
			continue;
		any = true;
		size_t eq = item.find('=');
		if (eq == std::string::npos)
			return "--change: '" + item + "' is not KNOB=VALUE";
		std::string name = item.substr(0, eq), value = item.substr(eq + 1);
		bool twice = false, bad = false;
		if (name == "preprocess-ms" || name == "compute-ms" || name == "host-ms") {
			std::optional<double> &field = name == "preprocess-ms" ? c->preprocess_ms
						       : name == "compute-ms"  ? c->compute_ms
									       : c->host_ms;
			auto v = parse_ms(value);
			twice = field.has_value();
			bad = !v;
			if (v)
				field = *v;
		} else if (name == "copy-bytes") {
			auto v = parse_size(value);
			twice = c->copy_bytes.has_value();
			bad = !v;
			if (v)
				c->copy_bytes = *v;
		} else {
			std::string known;
			for (const auto &n : change_knob_names())
				known += (known.empty() ? "" : ", ") + n;
			return "--change: unknown knob '" + name + "' (known: " + known + ")";
		}
		if (twice)
			return "--change: " + name + " given twice";
		if (bad)
			return "--change: " + name + ": cannot parse '" + value + "'";
	}
	if (!any)
		return "--change: empty (want KNOB=VALUE[,KNOB=VALUE...])";
	return "";
}

Knobs knobs_after_change(const Knobs &k, int rank)
{
	Knobs a = k;
	const KnobChange &c = k.change;
	if (!c.applies_to(rank))
		return a;
	if (c.preprocess_ms)
		a.preprocess_ms = *c.preprocess_ms;
	if (c.compute_ms)
		a.compute_ms = *c.compute_ms;
	if (c.host_ms)
		a.host_ms = *c.host_ms;
	if (c.copy_bytes)
		a.copy_bytes = *c.copy_bytes;
	return a;
}

std::vector<std::pair<std::string, double>> change_values(const KnobChange &c)
{
	std::vector<std::pair<std::string, double>> v;
	if (!c.active())
		return v;
	if (c.preprocess_ms)
		v.emplace_back("preprocess-ms", *c.preprocess_ms);
	if (c.compute_ms)
		v.emplace_back("compute-ms", *c.compute_ms);
	if (c.host_ms)
		v.emplace_back("host-ms", *c.host_ms);
	if (c.copy_bytes)
		v.emplace_back("copy-bytes", static_cast<double>(*c.copy_bytes));
	return v;
}

std::optional<HangKind> parse_hang_kind(const std::string &s)
{
	if (s == "sleep")
		return HangKind::kSleep;
	if (s == "dread")
		return HangKind::kDread;
	return std::nullopt;
}

const char *hang_kind_name(HangKind k)
{
	return k == HangKind::kSleep ? "sleep" : "dread";
}

int64_t peer_wait_timeout_ms(const Knobs &k)
{
	return 30000 + k.hang.ms();
}

namespace {

// The mid-run change and the hang; empty when both are usable.
std::string validate_change_hang(const Knobs &k)
{
	std::ostringstream e;
	const KnobChange &c = k.change;
	const Hang &h = k.hang;
	if (c.step >= 0 && !c.any_knob())
		e << "--change-at-step needs --change KNOB=VALUE";
	else if (c.any_knob() && c.step < 0)
		e << "--change needs --change-at-step N";
	else if (c.active() && (c.step < 1 || c.step >= k.steps))
		e << "--change-at-step must be 1.." << k.steps - 1 << " (a step after the first and before --steps "
		  << k.steps << "), got " << c.step;
	else if (c.rank != -1 && !c.active())
		e << "--change-rank needs --change-at-step and --change";
	else if (c.rank < -1 || c.rank >= k.ranks)
		e << "--change-rank " << c.rank << " does not exist with " << k.ranks << " ranks (-1: all)";
	else if ((c.preprocess_ms && *c.preprocess_ms < 0) || (c.compute_ms && *c.compute_ms < 0) ||
		 (c.host_ms && *c.host_ms < 0))
		e << "--change: times (preprocess-ms, compute-ms, host-ms) must be >= 0";
	else if (c.copy_bytes && *c.copy_bytes > (1ull << 30))
		e << "--change: copy-bytes must be <= 1 GiB";
	else if (c.copy_bytes && *c.copy_bytes > 0 && k.copy_chunk_bytes == 0)
		e << "--copy-chunk-bytes must be > 0";
	else if ((h.rank >= 0) != (h.step >= 0))
		e << "--hang-rank and --hang-at-step go together";
	else if (h.rank < -1 || h.rank >= k.ranks)
		e << "--hang-rank " << h.rank << " does not exist with " << k.ranks << " ranks";
	else if (h.step < -1 || h.step >= k.steps)
		e << "--hang-at-step must be 0.." << k.steps - 1 << " (before --steps " << k.steps << "), got " << h.step;
	else if (!(h.seconds > 0 && h.seconds <= 3600))
		e << "--hang-s must be > 0 and <= 3600 (got " << h.seconds << ")";
	return e.str();
}

// The host-steal knobs; then the change and the hang.
std::string validate_steals(const Knobs &k)
{
	std::ostringstream e;
	uint64_t slab = k.sample_bytes * static_cast<uint64_t>(k.batch_samples) * static_cast<uint64_t>(k.prefetch) *
			static_cast<uint64_t>(k.loader_workers);
	uint64_t dataset = k.sample_bytes * static_cast<uint64_t>(k.dataset_samples);
	uint64_t limit = static_cast<uint64_t>(std::max<int64_t>(k.loader_memory_mb, 0)) << 20;
	if (k.cpu_quota_ms < 0 || (k.cpu_quota_ms > 0 && k.cpu_quota_ms < 1))
		e << "--cpu-quota-ms must be 0 (off) or >= 1 (got " << k.cpu_quota_ms << ")";
	else if (!(k.cpu_period_ms >= 1 && k.cpu_period_ms <= 1000))
		e << "--cpu-period-ms must be 1..1000 (got " << k.cpu_period_ms << ")";
	else if (k.throttle_rank < -1 || k.throttle_rank >= k.ranks)
		e << "--throttle-rank " << k.throttle_rank << " does not exist with " << k.ranks << " ranks (-1: all)";
	else if (k.loader_memory_mb < 0 || k.loader_memory_mb > 65536)
		e << "--loader-memory-mb must be 0..65536";
	else if (limit > 0 && k.loader_mode != LoaderMode::kProcess)
		e << "--loader-memory-mb needs --loader-mode process (the limit is on the loader processes)";
	else if (limit > 0 && limit < slab + (8ull << 20))
		e << "--loader-memory-mb " << k.loader_memory_mb << " is below the loaders' batch slots (" << (slab >> 20)
		  << " MiB = sample-bytes x batch-samples x prefetch x loader-workers) + 8 MiB: they would be OOM-killed";
	else if (limit > 0 && dataset <= limit)
		e << "--loader-memory-mb " << k.loader_memory_mb << " is not below the dataset (" << (dataset >> 20)
		  << " MiB = sample-bytes x dataset-samples): nothing to reclaim";
	else if (k.softirq_pps < 0 || k.softirq_pps > 2e6)
		e << "--softirq-pps must be 0..2000000";
	else if (k.softirq_bytes < 1 || k.softirq_bytes > 65000)
		e << "--softirq-bytes must be 1..65000";
	else if (k.softirq_rank < 0 || k.softirq_rank >= k.ranks)
		e << "--softirq-rank " << k.softirq_rank << " does not exist with " << k.ranks << " ranks";
	else if (k.softirq_pps > 0 && !k.pin_main)
		e << "--softirq-pps needs --pin-main (RPS steers to the main thread's CPU)";
	else
		return validate_change_hang(k);
	return e.str();
}

} // namespace

std::string validate(const Knobs &k)
{
	std::ostringstream e;
	if (k.ranks < 1 || k.ranks > 16)
		e << "--ranks must be 1..16 (got " << k.ranks << ")";
	else if (k.nnodes < 1 || k.ranks % k.nnodes != 0)
		e << "--nnodes must be >= 1 and divide --ranks evenly (got " << k.nnodes << " nodes for " << k.ranks
		  << " ranks)";
	else if (std::string why = node_netns_problem(k); !why.empty())
		e << why;
	else if (k.steps < 1)
		e << "--steps must be >= 1 (got " << k.steps << ")";
	else if (k.duration_s < 0)
		e << "--duration must be >= 0";
	else if (k.loader_workers < 1 || k.loader_workers > 32)
		e << "--loader-workers must be 1..32 (got " << k.loader_workers << ")";
	else if (k.prefetch < 1 || k.prefetch > 16)
		e << "--prefetch must be 1..16 (got " << k.prefetch << ")";
	else if (k.batch_samples < 1 || k.batch_samples > 1024)
		e << "--batch-samples must be 1..1024";
	else if (k.sample_bytes == 0 || k.sample_bytes % 4096 != 0 || k.sample_bytes > (64ull << 20))
		e << "--sample-bytes must be a non-zero multiple of 4096 up to 64 MiB (O_DIRECT alignment), got "
		  << k.sample_bytes;
	else if (k.dataset_samples < 1 || k.dataset_samples > 100000)
		e << "--dataset-samples must be 1..100000";
	else if (k.sample_bytes * static_cast<uint64_t>(k.dataset_samples) > (4ull << 30))
		e << "dataset larger than 4 GiB (--sample-bytes x --dataset-samples)";
	else if (k.preprocess_ms < 0 || k.compute_ms < 0 || k.host_ms < 0)
		e << "times (--preprocess-ms, --compute-ms, --host-ms) must be >= 0";
	else if (k.copy_bytes > (1ull << 30))
		e << "--copy-bytes must be <= 1 GiB";
	else if (k.copy_bytes > 0 && k.copy_chunk_bytes == 0)
		e << "--copy-chunk-bytes must be > 0";
	else if (k.pcie_gbps <= 0 || k.link_gbps <= 0)
		e << "--pcie-gbps and --link-gbps must be > 0";
	else if (k.input_queues < 1 || k.input_queues > 64)
		e << "--input-queues must be 1..64";
	else if (k.host_cc_bytes > (1ull << 30) || k.device_cc_bytes > (1ull << 34))
		e << "collective sizes too large (host <= 1 GiB)";
	else if (k.net_mbit < 0)
		e << "--net-mbit must be >= 0";
	else if (k.straggler_rank >= k.ranks)
		e << "--straggler-rank " << k.straggler_rank << " does not exist with " << k.ranks << " ranks";
	else if (k.straggler_slowdown < 1.0)
		e << "--straggler-slowdown must be >= 1";
	else if (k.noise_per_cpu < 0 || k.noise_per_cpu > 16)
		e << "--noise must be 0..16 hogs per CPU";
	else
		return validate_steals(k);
	return e.str();
}

std::string knobs_to_json(const Knobs &k)
{
	nlohmann::json j{
		{"scenario", k.scenario},
		{"ranks", k.ranks},
		{"nnodes", k.nnodes},
		{"node_netns", k.node_netns},
		{"node_addrs", k.node_addrs},
		{"node_cgroups", k.node_cgroups},
		{"steps", k.steps},
		{"duration_s", k.duration_s},
		{"loader_workers", k.loader_workers},
		{"loader_mode", loader_mode_name(k.loader_mode)},
		{"prefetch", k.prefetch},
		{"batch_samples", k.batch_samples},
		{"sample_bytes", k.sample_bytes},
		{"dataset_samples", k.dataset_samples},
		{"preprocess_ms", k.preprocess_ms},
		{"copy_bytes", k.copy_bytes},
		{"copy_chunk_bytes", k.copy_chunk_bytes},
		{"pcie_gbps", k.pcie_gbps},
		{"dma_chunk_ns", k.dma_chunk_ns},
		{"compute_ms", k.compute_ms},
		{"device_cc_bytes", k.device_cc_bytes},
		{"link_gbps", k.link_gbps},
		{"input_queues", k.input_queues},
		{"host_cc_bytes", k.host_cc_bytes},
		{"net_mbit", k.net_mbit},
		{"host_ms", k.host_ms},
		{"straggler_rank", k.straggler_rank},
		{"straggler_slowdown", k.straggler_slowdown},
		{"noise_per_cpu", k.noise_per_cpu},
		{"noise_cpus", k.noise_cpus},
		{"pin_main", k.pin_main},
		{"data_dir", k.data_dir},
		{"dev_dir", k.dev_dir},
		{"sysfs_root", k.sysfs_root},
		{"efa_gbit", k.efa_gbit},
		{"nds", k.nds},
		{"efa_verbs", k.efa_verbs},
		{"mr_per_step_bytes", k.mr_per_step_bytes},
		{"cpu_quota_ms", k.cpu_quota_ms},
		{"cpu_period_ms", k.cpu_period_ms},
		{"throttle_rank", k.throttle_rank},
		{"loader_memory_mb", k.loader_memory_mb},
		{"softirq_pps", k.softirq_pps},
		{"softirq_bytes", k.softirq_bytes},
		{"softirq_rank", k.softirq_rank},
		{"change_at_step", k.change.active() ? k.change.step : -1},
		{"change_rank", k.change.rank},
		{"hang_rank", k.hang.active() ? k.hang.rank : -1},
		{"hang_at_step", k.hang.active() ? k.hang.step : -1},
		{"hang_s", k.hang.seconds},
		{"hang_kind", hang_kind_name(k.hang.kind)},
	};
	nlohmann::json change = nlohmann::json::object();
	for (const auto &[name, v] : change_values(k.change)) {
		if (v == std::floor(v) && std::fabs(v) < 1e15)
			change[name] = static_cast<int64_t>(v); // 40, not 40.0
		else
			change[name] = v;
	}
	j["change"] = change;
	return j.dump();
}

} // namespace trainsim
