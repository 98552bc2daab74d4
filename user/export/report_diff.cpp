// SPDX-License-Identifier: Apache-2.0
#include "export/report_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "export/summary.h"

namespace steptrace {

using nlohmann::json;

namespace {

// One run's counted steps (past the warm-up) of one rank, or of all: the
// step durations and each category's time, in ms.
struct Samples {
  std::vector<double> step;
  std::map<std::string, std::vector<double>> cat;
};

void add_steps(const json& rank, int skip, Samples& s) {
  if (!rank.contains("steps") || !rank["steps"].is_array()) return;
  for (const auto& st : rank["steps"]) {
    if (!st.is_object() || st.value("index", 0) < skip) continue;
    const size_t before = s.step.size();
    s.step.push_back(static_cast<double>(st.value("duration_ns", uint64_t{0})) / 1e6);
    if (st.contains("categories") && st["categories"].is_object())
      for (const auto& [c, ns] : st["categories"].items()) {
        auto& v = s.cat[c];
        v.resize(before, 0.0);  // 0 in the steps that did not list it
        v.push_back(ns.is_number() ? ns.get<double>() / 1e6 : 0.0);
      }
  }
  for (auto& [c, v] : s.cat) v.resize(s.step.size(), 0.0);
}

double mean(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x;
  return v.empty() ? 0 : m / static_cast<double>(v.size());
}

double variance(const std::vector<double>& v, double m) {
  if (v.size() < 2) return 0;
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

// Student's t 0.975 quantile for df degrees of freedom (Cornish-Fisher
// expansion around the normal's 1.96; within 1 % for df >= 3).
double t975(double df) {
  const double z = 1.959964;
  if (df <= 1) return 12.706;
  if (df < 3) return df < 2 ? 12.706 : 4.303;
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df * df);
}

// A change counts when its interval excludes zero and it is at least this
// share of A's step: with thousands of steps a 0.1 % drift is "significant"
// and means nothing.
constexpr double kMinEffect = 0.01;

MeanDelta compare(const std::string& what, const std::vector<double>& a, const std::vector<double>& b, double a_step_ms) {
  MeanDelta d;
  d.what = what;
  d.a_ms = mean(a);
  d.b_ms = mean(b);
  d.delta_ms = d.b_ms - d.a_ms;
  if (a.size() >= 2 && b.size() >= 2) {
    const double va = variance(a, d.a_ms) / static_cast<double>(a.size());
    const double vb = variance(b, d.b_ms) / static_cast<double>(b.size());
    const double se = std::sqrt(va + vb);
    // Welch-Satterthwaite degrees of freedom.
    const double df = (va + vb) * (va + vb) /
                      ((va * va) / static_cast<double>(a.size() - 1) + (vb * vb) / static_cast<double>(b.size() - 1));
    d.ci_ms = se > 0 ? t975(df) * se : 0;
    d.significant = std::fabs(d.delta_ms) > d.ci_ms && std::fabs(d.delta_ms) >= kMinEffect * a_step_ms;
  }
  return d;
}

RankDiff diff_samples(int rank, const Samples& a, const Samples& b) {
  RankDiff r;
  r.rank = rank;
  r.a_steps = a.step.size();
  r.b_steps = b.step.size();
  const double a_step = mean(a.step);
  r.step = compare("step", a.step, b.step, a_step);
  std::map<std::string, int> names;
  for (const auto& [c, v] : a.cat) names[c] = 1;
  for (const auto& [c, v] : b.cat) names[c] = 1;
  // A category a run never had was 0 in each of its steps.
  auto values = [](const Samples& s, const std::string& c) {
    auto it = s.cat.find(c);
    return it != s.cat.end() ? it->second : std::vector<double>(s.step.size(), 0.0);
  };
  for (const auto& [c, unused] : names) r.categories.push_back(compare(c, values(a, c), values(b, c), a_step));
  return r;
}

std::string verdict_of(const json& job) {
  if (job.contains("verdict") && job["verdict"].is_object()) return job["verdict"].value("headline", std::string());
  return {};
}

}  // namespace

Result<json> load_run(const std::string& path, const WindowPolicy& windows) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  char c = 0;
  while (in.get(c) && (c == ' ' || c == '\n' || c == '\t' || c == '\r')) {
  }
  if (in && c == '{') {  // a JSON report; captures begin with their magic
    in.seekg(0);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return make_error(fmt::format("{}: not a JSON report", path));
    if (j.contains("job") && j["job"].is_object()) return j["job"];
    if (j.contains("ranks")) return j;
    return make_error(fmt::format("{}: a JSON document without a job report (no \"job\" or \"ranks\")", path));
  }
  auto r = replay_capture(path, windows);
  if (!r) return r.error();
  return summary_json(*r)["job"];
}

ReportDiff diff_reports(const json& a, const json& b, std::string a_name, std::string b_name) {
  ReportDiff d;
  d.a_name = std::move(a_name);
  d.b_name = std::move(b_name);
  d.a_verdict = verdict_of(a);
  d.b_verdict = verdict_of(b);
  const int skip_a = a.value("skipped_warmup_steps", 0), skip_b = b.value("skipped_warmup_steps", 0);
  std::map<int, const json*> ra, rb;
  if (a.contains("ranks") && a["ranks"].is_array())
    for (const auto& r : a["ranks"]) ra[r.value("rank", -1)] = &r;
  if (b.contains("ranks") && b["ranks"].is_array())
    for (const auto& r : b["ranks"]) rb[r.value("rank", -1)] = &r;
  Samples all_a, all_b;
  for (const auto& [k, r] : ra) add_steps(*r, skip_a, all_a);
  for (const auto& [k, r] : rb) add_steps(*r, skip_b, all_b);
  d.all = diff_samples(-1, all_a, all_b);
  for (const auto& [k, r] : ra) {
    auto it = rb.find(k);
    if (it == rb.end()) {
      d.notes.push_back(fmt::format("rank {} is in {} only", k, d.a_name));
      continue;
    }
    Samples sa, sb;
    add_steps(*r, skip_a, sa);
    add_steps(*it->second, skip_b, sb);
    d.ranks.push_back(diff_samples(k, sa, sb));
  }
  for (const auto& [k, r] : rb)
    if (!ra.count(k)) d.notes.push_back(fmt::format("rank {} is in {} only", k, d.b_name));
  if (all_a.step.empty() || all_b.step.empty())
    d.notes.push_back(fmt::format("no counted steps in {}: nothing to compare",
                                  all_a.step.empty() ? d.a_name : d.b_name));
  if (d.all.step.a_ms > 0) {
    d.step_change_pct = 100 * d.all.step.delta_ms / d.all.step.a_ms;
    d.step_change_ci_pct = 100 * d.all.step.ci_ms / d.all.step.a_ms;
  }
  return d;
}

bool slower_than(const ReportDiff& d, double pct) {
  return d.all.step.significant && d.all.step.delta_ms > 0 && d.step_change_pct > pct;
}

namespace {

std::string row(const MeanDelta& m) {
  return fmt::format("   {:<16} {:>9.2f} -> {:>9.2f}  {:>+8.2f} +- {:<6.2f}{}\n", m.what, m.a_ms, m.b_ms, m.delta_ms,
                     m.ci_ms, m.significant ? " *" : "");
}

void rank_table(const RankDiff& r, std::string& o) {
  o += r.rank < 0 ? fmt::format(" all ranks   steps {} / {}\n", r.a_steps, r.b_steps)
                  : fmt::format(" rank {}      steps {} / {}\n", r.rank, r.a_steps, r.b_steps);
  o += row(r.step);
  for (const auto& c : r.categories)
    if (c.a_ms >= 0.005 || c.b_ms >= 0.005) o += row(c);
}

json delta_json(const MeanDelta& m) {
  return {{"a_ms", m.a_ms}, {"b_ms", m.b_ms}, {"delta_ms", m.delta_ms}, {"ci95_ms", m.ci_ms}, {"significant", m.significant}};
}

json rank_json(const RankDiff& r) {
  json cats = json::object();
  for (const auto& c : r.categories) cats[c.what] = delta_json(c);
  json j = {{"a_steps", r.a_steps}, {"b_steps", r.b_steps}, {"step", delta_json(r.step)}, {"categories", cats}};
  if (r.rank >= 0) j["rank"] = r.rank;
  return j;
}

}  // namespace

std::string format_diff_text(const ReportDiff& d) {
  std::string o;
  o += fmt::format("A: {}\n   {}\nB: {}\n   {}\n", d.a_name, d.a_verdict, d.b_name, d.b_verdict);
  const auto& s = d.all.step;
  std::string judged = !s.significant ? "no significant change" : s.delta_ms > 0 ? "SLOWER" : "faster";
  o += fmt::format("\nstep time {:.2f} -> {:.2f} ms ({:+.2f} ms, {:+.1f} % +- {:.1f} %, 95 % interval): {}\n", s.a_ms,
                   s.b_ms, s.delta_ms, d.step_change_pct, d.step_change_ci_pct, judged);
  // What moved, largest first, over all ranks; then where (per rank).
  std::vector<const MeanDelta*> moved;
  for (const auto& c : d.all.categories)
    if (c.significant) moved.push_back(&c);
  std::sort(moved.begin(), moved.end(),
            [](const MeanDelta* x, const MeanDelta* y) { return std::fabs(x->delta_ms) > std::fabs(y->delta_ms); });
  for (const MeanDelta* c : moved) {
    std::string where;
    for (const auto& r : d.ranks)
      for (const auto& rc : r.categories)
        if (rc.what == c->what && rc.significant)
          where += fmt::format("{}rank {} {:+.2f}", where.empty() ? "" : ", ", r.rank, rc.delta_ms);
    o += fmt::format("  {} {:+.2f} ms/step{}\n", c->what, c->delta_ms, where.empty() ? "" : " (" + where + ")");
  }
  if (moved.empty()) o += "  no category changed significantly\n";
  for (const auto& n : d.notes) o += "  note: " + n + "\n";
  o += "\nms per step, A -> B, B - A +- its 95 % interval (* significant: the interval excludes 0 and the change is "
       ">= 1 % of A's step)\n";
  rank_table(d.all, o);
  for (const auto& r : d.ranks) rank_table(r, o);
  return o;
}

json diff_json(const ReportDiff& d) {
  json ranks = json::array();
  for (const auto& r : d.ranks) ranks.push_back(rank_json(r));
  return {{"a", {{"name", d.a_name}, {"verdict", d.a_verdict}}},
          {"b", {{"name", d.b_name}, {"verdict", d.b_verdict}}},
          {"step_change_pct", d.step_change_pct},
          {"step_change_ci95_pct", d.step_change_ci_pct},
          {"all_ranks", rank_json(d.all)},
          {"ranks", ranks},
          {"notes", d.notes}};
}

}  // namespace steptrace
