// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "truth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace trainsim::truth {

using nlohmann::json;

namespace {
constexpr const char *kFormat = "trainsim-truth/1";

std::string argmax(const std::map<std::string, int64_t> &m)
{
	std::string best = kOther;
	int64_t best_ns = -1;
	for (const auto &c : categories()) { // fixed order: ties are deterministic
		auto it = m.find(c);
		if (it != m.end() && it->second > best_ns) {
			best = c;
			best_ns = it->second;
		}
	}
	return best;
}

json number(double v)
{
	if (v == std::floor(v) && std::fabs(v) < 1e15)
		return static_cast<int64_t>(v); // 40, not 40.0
	return v;
}

void change_hang_to_json(const Truth &t, json &j)
{
	if (t.change) {
		json knobs = json::object();
		for (const auto &[name, v] : t.change->knobs)
			knobs[name] = number(v);
		j["change"] = {{"step", t.change->step}, {"rank", t.change->rank}, {"knobs", knobs}};
	}
	if (t.hang) {
		const Hang &h = *t.hang;
		j["hang"] = {{"rank", h.rank},   {"step", h.step},         {"kind", h.kind},
			     {"pid", h.pid},     {"tid", h.tid},           {"seconds", number(h.seconds)},
			     {"start_ns", h.start_ns}, {"end_ns", h.end_ns}};
	}
}

void change_hang_from_json(const json &j, Truth &t)
{
	if (j.contains("change")) {
		const json &c = j.at("change");
		Change ch;
		ch.step = c.at("step").get<int>();
		ch.rank = c.at("rank").get<int>();
		for (const auto &[name, v] : c.at("knobs").items())
			ch.knobs[name] = v.get<double>();
		t.change = ch;
	}
	if (j.contains("hang")) {
		const json &h = j.at("hang");
		t.hang = Hang{h.at("rank").get<int>(),		h.at("step").get<int>(),
			      h.at("kind").get<std::string>(),	h.at("pid").get<int>(),
			      h.at("tid").get<int>(),		h.at("seconds").get<double>(),
			      h.at("start_ns").get<int64_t>(), h.at("end_ns").get<int64_t>()};
	}
}
} // namespace

const std::vector<std::string> &categories()
{
	static const std::vector<std::string> c{kDeviceExecute, kDataLoading,   kDmaSubmission, kCollective,
						kHostOverhead,  kCpuContention, kOther};
	return c;
}

bool is_category(const std::string &name)
{
	const auto &c = categories();
	return std::find(c.begin(), c.end(), name) != c.end();
}

void compute_breakdown(Step &step)
{
	std::map<std::string, int64_t> b;
	for (const auto &c : categories())
		b[c] = 0;
	int64_t cursor = step.start_ns;
	for (const auto &p : step.phases) {
		int64_t start = std::max(p.start_ns, cursor);
		int64_t end = std::min(p.end_ns, step.end_ns);
		if (start > cursor)
			b[kOther] += start - cursor;
		if (end <= start)
			continue;
		int64_t dur = end - start;
		int64_t rd = p.busy_wait ? 0 : std::clamp<int64_t>(p.run_delay_ns, 0, dur);
		b[kCpuContention] += rd;
		b[is_category(p.category) ? p.category : kOther] += dur - rd;
		cursor = end;
	}
	if (step.end_ns > cursor)
		b[kOther] += step.end_ns - cursor;
	step.breakdown = b;
	step.gating = argmax(b);
}

std::map<std::string, double> shares(const Step &step)
{
	std::map<std::string, double> s;
	double dur = static_cast<double>(step.duration_ns());
	for (const auto &c : categories()) {
		auto it = step.breakdown.find(c);
		s[c] = (dur > 0 && it != step.breakdown.end()) ? static_cast<double>(it->second) / dur : 0.0;
	}
	return s;
}

std::map<std::string, double> mean_shares(const std::vector<const Step *> &steps)
{
	std::map<std::string, double> m;
	for (const auto &c : categories())
		m[c] = 0;
	if (steps.empty())
		return m;
	for (const Step *s : steps)
		for (const auto &[c, v] : shares(*s))
			m[c] += v;
	for (auto &[c, v] : m)
		v /= static_cast<double>(steps.size());
	return m;
}

std::string to_json(const Truth &t, int indent)
{
	json j;
	j["format"] = kFormat;
	j["scenario"] = t.scenario;
	j["knobs"] = t.knobs_json.empty() ? json::object() : json::parse(t.knobs_json);
	j["world_size"] = t.ranks;
	j["nnodes"] = t.nnodes;
	j["devices"] = t.devices;
	j["libnrt"] = t.libnrt;
	j["categories"] = categories();
	json ranks = json::array();
	for (const auto &r : t.rank_data) {
		json jr;
		jr["rank"] = r.rank;
		jr["pid"] = r.pid;
		jr["main_tid"] = r.main_tid;
		jr["node"] = r.node;
		if (!r.node_cgroup.empty())
			jr["node_cgroup"] = r.node_cgroup;
		jr["loader_pids"] = r.loader_pids;
		jr["loader_tids"] = r.loader_tids;
		jr["device"] = r.device;
		json steps = json::array();
		for (const auto &s : r.steps) {
			json js;
			js["step"] = s.index;
			js["start_ns"] = s.start_ns;
			js["end_ns"] = s.end_ns;
			js["gating"] = s.gating;
			js["device_compute_ns"] = s.device_compute_ns;
			js["device_collective_ns"] = s.device_collective_ns;
			js["device_compute_actual_ns"] = s.device_compute_actual_ns;
			js["device_collective_actual_ns"] = s.device_collective_actual_ns;
			js["throttled_ns"] = s.throttled_ns;
			js["softirq_ns"] = s.softirq_ns;
			js["loader_memstall_ns"] = s.loader_memstall_ns;
			js["loader_memstall_some_ns"] = s.loader_memstall_some_ns;
			js["loader_memstall_full_ns"] = s.loader_memstall_full_ns;
			js["breakdown"] = s.breakdown;
			json phases = json::array();
			for (const auto &p : s.phases)
				phases.push_back({{"name", p.name},
						  {"category", p.category},
						  {"start_ns", p.start_ns},
						  {"end_ns", p.end_ns},
						  {"run_delay_ns", p.run_delay_ns},
						  {"busy_wait", p.busy_wait},
						  {"throttled_ns", p.throttled_ns},
						  {"softirq_ns", p.softirq_ns}});
			js["phases"] = std::move(phases);
			steps.push_back(std::move(js));
		}
		jr["steps"] = std::move(steps);
		json verbs = json::array();
		for (const auto &v : r.verbs)
			verbs.push_back({{"name", v.name},
					 {"enter_ns", v.enter_ns},
					 {"return_ns", v.return_ns},
					 {"bytes", v.bytes},
					 {"ret", v.ret}});
		jr["verbs"] = std::move(verbs);
		jr["cpu_functions"] = r.cpu_functions;
		if (r.steals.any()) {
			const RankSteals &x = r.steals;
			jr["steals"] = {{"cpu_cgroup", x.cpu_cgroup},
					{"cpu_cgroup_version", x.cpu_cgroup_version},
					{"cpu_quota_us", x.cpu_quota_us},
					{"cpu_period_us", x.cpu_period_us},
					{"loader_memory_cgroup", x.loader_memory_cgroup},
					{"loader_memory_version", x.loader_memory_version},
					{"loader_memory_limit_bytes", x.loader_memory_limit_bytes},
					{"loader_psi_cgroup", x.loader_psi_cgroup},
					{"loader_psi_cgroups", x.loader_psi_cgroups},
					{"loader_memory_counters", x.loader_memory_counters},
					{"softirq_cpu", x.softirq_cpu},
					{"softirq_method", x.softirq_method},
					{"softirq_pps", number(x.softirq_pps)},
					{"softirq_unmatched", x.softirq_unmatched}};
		}
		ranks.push_back(std::move(jr));
	}
	j["ranks"] = std::move(ranks);
	change_hang_to_json(t, j);
	return j.dump(indent);
}

std::optional<Truth> from_json(const std::string &text, std::string *err)
{
	try {
		json j = json::parse(text);
		if (j.value("format", "") != kFormat) {
			if (err)
				*err = "not a trainsim truth file (format is not " + std::string(kFormat) + ")";
			return std::nullopt;
		}
		Truth t;
		t.scenario = j.at("scenario").get<std::string>();
		t.knobs_json = j.at("knobs").dump();
		t.ranks = j.at("world_size").get<int>();
		t.nnodes = j.value("nnodes", 1);
		t.devices = j.at("devices").get<std::vector<std::string>>();
		t.libnrt = j.at("libnrt").get<std::string>();
		for (const auto &jr : j.at("ranks")) {
			Rank r;
			r.rank = jr.at("rank").get<int>();
			r.pid = jr.at("pid").get<int>();
			r.main_tid = jr.at("main_tid").get<int>();
			r.node = jr.value("node", 0);
			r.node_cgroup = jr.value("node_cgroup", std::string());
			r.loader_pids = jr.at("loader_pids").get<std::vector<int>>();
			r.loader_tids = jr.at("loader_tids").get<std::vector<int>>();
			r.device = jr.value("device", "");
			for (const auto &js : jr.at("steps")) {
				Step s;
				s.index = js.at("step").get<int>();
				s.start_ns = js.at("start_ns").get<int64_t>();
				s.end_ns = js.at("end_ns").get<int64_t>();
				s.device_compute_ns = js.at("device_compute_ns").get<int64_t>();
				s.device_collective_ns = js.at("device_collective_ns").get<int64_t>();
				s.device_compute_actual_ns = js.value("device_compute_actual_ns", int64_t{0});
				s.device_collective_actual_ns = js.value("device_collective_actual_ns", int64_t{0});
				s.throttled_ns = js.value("throttled_ns", int64_t{0});
				s.softirq_ns = js.value("softirq_ns", int64_t{0});
				s.loader_memstall_ns = js.value("loader_memstall_ns", int64_t{0});
				s.loader_memstall_some_ns = js.value("loader_memstall_some_ns", int64_t{0});
				s.loader_memstall_full_ns = js.value("loader_memstall_full_ns", int64_t{0});
				for (const auto &jp : js.at("phases")) {
					Phase p;
					p.name = jp.at("name").get<std::string>();
					p.category = jp.at("category").get<std::string>();
					if (!is_category(p.category))
						throw std::runtime_error("unknown category '" + p.category + "'");
					p.start_ns = jp.at("start_ns").get<int64_t>();
					p.end_ns = jp.at("end_ns").get<int64_t>();
					p.run_delay_ns = jp.at("run_delay_ns").get<int64_t>();
					p.busy_wait = jp.value("busy_wait", false);
					p.throttled_ns = jp.value("throttled_ns", int64_t{0});
					p.softirq_ns = jp.value("softirq_ns", int64_t{0});
					s.phases.push_back(std::move(p));
				}
				s.breakdown = js.at("breakdown").get<std::map<std::string, int64_t>>();
				s.gating = js.at("gating").get<std::string>();
				r.steps.push_back(std::move(s));
			}
			if (jr.contains("verbs"))
				for (const auto &jv : jr.at("verbs"))
					r.verbs.push_back(VerbCall{jv.at("name").get<std::string>(),
								   jv.at("enter_ns").get<int64_t>(),
								   jv.at("return_ns").get<int64_t>(),
								   jv.at("bytes").get<uint64_t>(), jv.at("ret").get<int>()});
			if (jr.contains("cpu_functions"))
				r.cpu_functions = jr.at("cpu_functions").get<std::map<std::string, int64_t>>();
			if (jr.contains("steals")) {
				const json &x = jr.at("steals");
				RankSteals &st = r.steals;
				st.cpu_cgroup = x.value("cpu_cgroup", "");
				st.cpu_cgroup_version = x.value("cpu_cgroup_version", "");
				st.cpu_quota_us = x.value("cpu_quota_us", int64_t{0});
				st.cpu_period_us = x.value("cpu_period_us", int64_t{0});
				st.loader_memory_cgroup = x.value("loader_memory_cgroup", "");
				st.loader_memory_version = x.value("loader_memory_version", "");
				st.loader_memory_limit_bytes = x.value("loader_memory_limit_bytes", int64_t{0});
				st.loader_psi_cgroup = x.value("loader_psi_cgroup", "");
				st.loader_psi_cgroups = x.value("loader_psi_cgroups", std::vector<std::string>{});
				st.loader_memory_counters =
					x.value("loader_memory_counters", std::map<std::string, int64_t>{});
				st.softirq_cpu = x.value("softirq_cpu", -1);
				st.softirq_method = x.value("softirq_method", "");
				st.softirq_pps = x.value("softirq_pps", 0.0);
				st.softirq_unmatched = x.value("softirq_unmatched", int64_t{0});
			}
			t.rank_data.push_back(std::move(r));
		}
		change_hang_from_json(j, t);
		return t;
	} catch (const std::exception &e) {
		if (err)
			*err = std::string("bad truth JSON: ") + e.what();
		return std::nullopt;
	}
}

bool save(const Truth &t, const std::string &path, std::string *err)
{
	std::string tmp = path + ".tmp";
	{
		std::ofstream f(tmp, std::ios::trunc);
		if (!f) {
			if (err)
				*err = "cannot write " + tmp;
			return false;
		}
		f << to_json(t) << "\n";
		if (!f.good()) {
			if (err)
				*err = "write to " + tmp + " failed";
			return false;
		}
	}
	// Readers never see a half-written file.
	if (std::rename(tmp.c_str(), path.c_str()) != 0) {
		if (err)
			*err = "cannot rename " + tmp + " to " + path;
		return false;
	}
	return true;
}

std::optional<Truth> load(const std::string &path, std::string *err)
{
	std::ifstream f(path);
	if (!f) {
		if (err)
			*err = "cannot open " + path;
		return std::nullopt;
	}
	std::stringstream ss;
	ss << f.rdbuf();
	return from_json(ss.str(), err);
}

int64_t uncovered_ns(int64_t a, int64_t b, const std::vector<std::pair<int64_t, int64_t>> &covered)
{
	if (a > b)
		std::swap(a, b);
	int64_t in = 0;
	auto it = std::lower_bound(covered.begin(), covered.end(), a,
				   [](const std::pair<int64_t, int64_t> &x, int64_t t) { return x.second <= t; });
	for (; it != covered.end() && it->first < b; ++it)
		in += std::min(it->second, b) - std::max(it->first, a);
	return b - a - in;
}

Comparison compare(const Truth &truth, const TracerResult &tracer, const CompareOptions &opt)
{
	Comparison c;
	for (const auto &cat : categories())
		c.share_error_pp[cat] = 0;
	double dur_err_sum = 0;
	int gating_same = 0;
	for (const Rank &r : truth.rank_data) {
		const TracerRank *tr = nullptr;
		for (const auto &x : tracer.ranks)
			if ((x.rank >= 0 && x.rank == r.rank) || (x.rank < 0 && x.pid == r.pid))
				tr = &x;
		if (!tr) {
			c.unmatched_ranks.push_back(std::to_string(r.rank));
			continue;
		}
		int64_t window_start = INT64_MAX, window_end = INT64_MIN;
		int64_t from = INT64_MIN;
		if (opt.from_tracer_start)
			from = tr->steps.size() > static_cast<size_t>(opt.skip_first_steps)
				       ? tr->steps[static_cast<size_t>(opt.skip_first_steps)].start_ns
				       : INT64_MAX;
		for (const Step &s : r.steps) {
			if (s.index < opt.skip_first_steps)
				continue;
			if (s.start_ns + (s.end_ns - s.start_ns) / 2 < from)
				continue;
			c.truth_steps++;
			window_start = std::min(window_start, s.start_ns);
			window_end = std::max(window_end, s.end_ns);
			const TracerStep *best = nullptr;
			int64_t best_overlap = 0;
			for (const auto &ts : tr->steps) {
				int64_t ov = std::min(ts.end_ns, s.end_ns) - std::max(ts.start_ns, s.start_ns);
				if (ov > best_overlap) {
					best_overlap = ov;
					best = &ts;
				}
			}
			if (!best)
				continue;
			c.matched_steps++;
			auto truth_share = shares(s);
			double tdur = static_cast<double>(best->end_ns - best->start_ns);
			for (const auto &cat : categories()) {
				auto it = best->category_ns.find(cat);
				double v = (it != best->category_ns.end() && tdur > 0) ? static_cast<double>(it->second) / tdur
										       : 0.0;
				c.share_error_pp[cat] += std::fabs(v - truth_share[cat]) * 100.0;
			}
			double sdur = static_cast<double>(s.duration_ns());
			// Each boundary's offset from the truth's, less the runqueue
			// waits between the two (signed: the direction it moved).
			auto offset = [&](int64_t traced, int64_t real) {
				int64_t d = uncovered_ns(traced, real, tr->runnable);
				return traced >= real ? d : -d;
			};
			double ddur = static_cast<double>(offset(best->end_ns, s.end_ns) -
							  offset(best->start_ns, s.start_ns));
			if (sdur > 0)
				dur_err_sum += std::fabs(ddur) / sdur * 100.0;
			if (argmax(best->category_ns) == s.gating)
				gating_same++;
		}
		for (const auto &ts : tr->steps) {
			int64_t mid = ts.start_ns + (ts.end_ns - ts.start_ns) / 2;
			if (mid >= window_start && mid <= window_end)
				c.tracer_steps++;
		}
	}
	if (c.matched_steps > 0) {
		for (auto &[cat, v] : c.share_error_pp) {
			v /= c.matched_steps;
			c.max_share_error_pp = std::max(c.max_share_error_pp, v);
		}
		c.mean_step_duration_error_pct = dur_err_sum / c.matched_steps;
		c.gating_agreement = static_cast<double>(gating_same) / c.matched_steps;
	}
	c.step_count_match = c.truth_steps > 0 && c.tracer_steps == c.truth_steps && c.matched_steps == c.truth_steps;
	return c;
}

std::string Comparison::summary() const
{
	std::ostringstream o;
	char buf[128];
	o << "steps: truth " << truth_steps << ", tracer " << tracer_steps << ", matched " << matched_steps
	  << (step_count_match ? " (match)" : " (MISMATCH)") << "\n";
	snprintf(buf, sizeof(buf), "step duration error: %.1f%%, gating agreement: %.0f%%\n",
		 mean_step_duration_error_pct, gating_agreement * 100.0);
	o << buf;
	for (const auto &cat : categories()) {
		snprintf(buf, sizeof(buf), "  %-15s %6.1f pp\n", cat.c_str(), share_error_pp.at(cat));
		o << buf;
	}
	for (const auto &r : unmatched_ranks)
		o << "  rank " << r << ": no tracer data\n";
	return o.str();
}

} // namespace trainsim::truth
