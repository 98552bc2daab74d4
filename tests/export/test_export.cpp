// SPDX-License-Identifier: Apache-2.0
// The report outputs (terminal text, top frame, Perfetto trace, HTML) made
// from one SessionReport: a real capture of trainsim's straggler scenario from
// the committed corpus, replayed with no root.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "export/html_report.h"
#include "export/perfetto.h"
#include "export/report_stats.h"
#include "export/text_report.h"
#include "export/top.h"
#include "export/summary.h"
#include "session/session.h"

using namespace steptrace;
using nlohmann::json;

namespace {

const std::string kCorpus = CAPTURE_CORPUS_DIR;

const SessionReport& straggler() {
  static SessionReport r = [] {
    auto rr = replay_capture(kCorpus + "/ok-straggler.cap");
    REQUIRE(rr);
    return std::move(*rr);
  }();
  return r;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) v.push_back(l);
  return v;
}

std::string strip_ansi(const std::string& s) { return std::regex_replace(s, std::regex("\x1b\\[[0-9;?]*[A-Za-z]"), ""); }

size_t columns(const std::string& line) {
  // UTF-8 aware: count code points.
  size_t n = 0;
  for (unsigned char c : strip_ansi(line)) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

TEST_CASE("export: the corpus capture is a straggler job with steps", "[export]") {
  const auto& r = straggler();
  REQUIRE(r.job.ranks.size() >= 2);
  for (const auto& rk : r.job.ranks) CHECK(rk.steps.size() >= 3);
  CHECK(r.job.verdict.straggler_rank >= 0);
}

TEST_CASE("export: terminal report puts the verdict first and fits 100 columns", "[export]") {
  const auto& r = straggler();
  for (int verbose : {0, 1}) {
    for (bool color : {false, true}) {
      auto text = format_report_text(r, {color, verbose});
      auto ls = lines_of(text);
      REQUIRE(!ls.empty());
      CHECK(strip_ansi(ls.front()).rfind("VERDICT: " + r.job.verdict.headline.substr(0, 40), 0) == 0);
      for (const auto& l : ls) {
        INFO(l);
        CHECK(columns(l) <= kReportColumns);
      }
      CHECK((text.find('\x1b') != std::string::npos) == color);
      // Section order: verdict, steps, percentiles, evidence, what-if, ranks, footer.
      std::vector<std::string> order = {"VERDICT:", "Steps of rank", "Percentiles over", "Evidence", "What if (",
                                        "Ranks (share", "Events and overhead"};
      size_t pos = 0;
      for (const auto& s : order) {
        size_t p = text.find(s, pos);
        INFO(s);
        REQUIRE(p != std::string::npos);
        pos = p;
      }
      CHECK((text.find("Threads (ms)") != std::string::npos) == (verbose > 0));
    }
  }
}

TEST_CASE("export: the straggler rank's line is marked, and only that one", "[export]") {
  const auto& r = straggler();
  auto ls = lines_of(format_report_text(r, {false, 0}));
  int marked = 0;
  for (const auto& l : ls) {
    if (l.find("<- straggler") == std::string::npos) continue;
    ++marked;
    std::istringstream in(l);
    int rank = -1;
    in >> rank;
    CHECK(rank == r.job.verdict.straggler_rank);
  }
  CHECK(marked == 1);
}

TEST_CASE("export: dropped events mark the report INCOMPLETE in every output", "[export]") {
  SessionReport r = straggler();
  CHECK(format_report_text(r).find("INCOMPLETE") == std::string::npos);
  r.drops.dropped[ST_EV_SCHED_SWITCH] = 7;
  r.drops.emitted[ST_EV_SCHED_SWITCH] += 7;
  auto text = format_report_text(r);
  CHECK(text.find("[INCOMPLETE]") < text.find("confidence"));  // in the verdict, before anything else
  CHECK(text.find("7 dropped") != std::string::npos);
  CHECK(html_report(r).find("id=\"incomplete\"") != std::string::npos);
  auto tr = perfetto_trace(r);
  CHECK(tr["metadata"]["incomplete"] == true);
  TopFrameState st;
  CHECK(render_top_frame(r, {}, st).find("[INCOMPLETE]") != std::string::npos);
}

TEST_CASE("export: BPF-side losses are reported next to the drops and mark INCOMPLETE where they affect attribution",
          "[export]") {
  SessionReport r = straggler();
  REQUIRE_FALSE(r.incomplete());
  REQUIRE(r.drops.total_dropped() == 0);
  SECTION("a full target map") {
    r.drops.losses[ST_LOSS_FORK_TARGET] = 3;
    CHECK(r.incomplete());
    auto text = strip_ansi(format_report_text(r));
    CHECK(text.find("[INCOMPLETE]") < text.find("confidence"));
    CHECK(text.find("INCOMPLETE: 3 new processes not followed (target map full)") != std::string::npos);
    CHECK(text.find("0 dropped, 3 lost in the kernel") != std::string::npos);
    CHECK(text.find("fork_target_full 3") != std::string::npos);
    for (const auto& l : lines_of(text)) CHECK(columns(l) <= 100);
    auto j = summary_json(r);
    CHECK(j["incomplete"] == true);
    CHECK(j["losses"]["fork_target_full"]["count"] == 3);
    CHECK(j["losses"]["fork_target_full"]["affects_attribution"] == true);
    CHECK(j["losses"]["block_rq_full"]["count"] == 0);
    CHECK(html_report(r).find("INCOMPLETE: 3 new processes not followed") != std::string::npos);
    CHECK(perfetto_trace(r)["metadata"]["incomplete"] == true);
  }
  SECTION("drops and losses together are both named") {
    r.drops.dropped[ST_EV_SCHED_SWITCH] = 7;
    r.drops.losses[ST_LOSS_BLOCK_RQ] = 2;
    r.drops.losses[ST_LOSS_SOCK_EVICTED] = 5;
    CHECK(incomplete_reason(r.drops) ==
          "the kernel dropped 7 events; 2 block requests not tracked (request map full); 5 sockets evicted from the "
          "socket map (later retransmits/state changes unattributed)");
  }
  SECTION("an aggregate eviction is shown but does not make the verdict incomplete") {
    r.drops.losses[ST_LOSS_AGG_EVICTED] = 4;
    CHECK_FALSE(r.incomplete());
    auto text = strip_ansi(format_report_text(r));
    CHECK(text.find("INCOMPLETE") == std::string::npos);
    CHECK(text.find("agg_evicted 4") != std::string::npos);
    auto j = summary_json(r);
    CHECK(j["incomplete"] == false);
    CHECK(j["losses"]["agg_evicted"]["count"] == 4);
    CHECK(j["losses"]["agg_evicted"]["affects_attribution"] == false);
  }
  SECTION("kretprobe misses a kernel cannot count are said to be unmeasurable, not zero") {
    r.drops.kretprobe = LossMeasure::not_measurable;
    CHECK_FALSE(r.incomplete());
    CHECK(strip_ansi(format_report_text(r)).find("kretprobe_missed not measurable") != std::string::npos);
    CHECK(summary_json(r)["losses"]["kretprobe_missed"]["measurable"] == false);
    r.drops.kretprobe = LossMeasure::measured;
    r.drops.losses[ST_LOSS_KRETPROBE_MISSED] = 9;
    CHECK(r.incomplete());
    CHECK(summary_json(r)["losses"]["kretprobe_missed"]["measurable"] == true);
  }
}

TEST_CASE("drop stats: window deltas and tracer sums carry the losses", "[export]") {
  DropStats a;
  a.emitted[ST_EV_SCHED_SWITCH] = 10;
  a.losses[ST_LOSS_FORK_TARGET] = 2;
  a.kretprobe = LossMeasure::measured;
  DropStats b = a;
  b.emitted[ST_EV_SCHED_SWITCH] = 15;
  b.losses[ST_LOSS_FORK_TARGET] = 5;
  DropStats d = b.since(a);
  CHECK(d.emitted[ST_EV_SCHED_SWITCH] == 5);
  CHECK(d.losses[ST_LOSS_FORK_TARGET] == 3);
  CHECK(d.incomplete());
  CHECK_FALSE(a.since(a).incomplete());
  DropStats sum;
  sum += a;
  CHECK(sum.kretprobe == LossMeasure::measured);
  DropStats old;
  old.kretprobe = LossMeasure::not_measurable;
  sum += old;
  sum += b;
  CHECK(sum.losses[ST_LOSS_FORK_TARGET] == 7);
  CHECK(sum.kretprobe == LossMeasure::not_measurable);
}

TEST_CASE("export: percentiles use nearest rank", "[export]") {
  auto p = percentiles({5, 1, 4, 2, 3});
  CHECK(p.p50 == 3);
  CHECK(p.max == 5);
  CHECK(percentiles({}).max == 0);
  std::vector<uint64_t> hundred;
  for (uint64_t i = 1; i <= 100; ++i) hundred.push_back(i);
  p = percentiles(hundred);
  CHECK(p.p90 == 90);
  CHECK(p.p99 == 99);
}

TEST_CASE("export: Perfetto trace parses and has the tracks and slices it promises", "[export]") {
  const auto& r = straggler();
  // Round-trip through the serialized text: what ui.perfetto.dev gets.
  json t = json::parse(perfetto_trace(r).dump());
  REQUIRE(t["traceEvents"].is_array());
  const auto& ev = t["traceEvents"];
  std::set<uint64_t> named_pids;
  std::map<std::pair<uint64_t, uint64_t>, std::string> thread_names;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<double, double>>> slices;
  size_t step_slices = 0, sched_slices = 0, ioctl_slices = 0, counters = 0;
  struct Flow {
    std::pair<uint64_t, double> start{0, -1}, end{0, -1};  // tid, ts
  };
  std::map<uint64_t, Flow> flows;
  std::map<uint64_t, int> async_balance;
  for (const auto& e : ev) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e["pid"].is_number_unsigned());
    REQUIRE(e["tid"].is_number_unsigned());
    std::string ph = e["ph"];
    auto key = std::make_pair(e["pid"].get<uint64_t>(), e["tid"].get<uint64_t>());
    if (ph == "M") {
      if (e["name"] == "process_name") named_pids.insert(key.first);
      if (e["name"] == "thread_name") thread_names[key] = e["args"]["name"];
      continue;
    }
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    if (ph == "X") {
      REQUIRE(e["dur"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      slices[key].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
      std::string cat = e["cat"];
      if (cat == "step") {
        ++step_slices;
        double sum = 0;
        for (auto c : kCategoryNames) sum += e["args"][std::string(c) + "_ms"].get<double>();
        CHECK(sum == Approx(e["args"]["duration_ms"].get<double>()).epsilon(0.02).margin(0.05));
        CHECK(e["dur"].get<double>() / 1e3 == Approx(e["args"]["duration_ms"].get<double>()).margin(0.01));
      } else if (cat == "sched") {
        ++sched_slices;
        std::string n = e["name"];
        CHECK((n == "running" || n == "runnable" || n == "sleeping" || n == "disk_wait"));
      } else if (cat == "ioctl") {
        ++ioctl_slices;
      }
    } else if (ph == "C") {
      ++counters;
      CHECK(e["args"].is_object());
    } else if (ph == "b" || ph == "e") {
      async_balance[e["id"].get<uint64_t>()] += ph == "b" ? 1 : -1;
    } else if (ph == "s" || ph == "f") {
      // Wakeup arrows: one start (the waker) and one end (a rank's main thread) per id, at one time.
      auto& fl = flows[e["id"].get<uint64_t>()];
      (ph == "s" ? fl.start : fl.end) = {key.second, e["ts"].get<double>()};
      if (ph == "f") CHECK(e["bp"] == "e");
    } else {
      FAIL("unexpected phase " << ph);
    }
  }
  std::set<uint64_t> main_tids;
  for (const auto& rk : r.job.ranks) main_tids.insert(rk.main_tid);
  CHECK(flows.size() == t["metadata"]["wake_flows"].get<size_t>());
  CHECK(flows.size() > 0);
  for (const auto& [id, fl] : flows) {
    CHECK(fl.start.first != 0);
    CHECK(main_tids.count(fl.end.first) == 1);
    CHECK(fl.start.second == fl.end.second);
  }
  size_t steps = 0;
  for (const auto& rk : r.job.ranks) {
    steps += rk.steps.size();
    CHECK(named_pids.count(rk.pid) == 1);
    auto it = thread_names.find({rk.pid, kStepsTrackTid + static_cast<uint64_t>(rk.rank)});
    REQUIRE(it != thread_names.end());
    CHECK(it->second == "steps (rank " + std::to_string(rk.rank) + ")");
    CHECK(thread_names.count({rk.pid, rk.main_tid}) == 1);
  }
  CHECK(step_slices == steps);
  CHECK(sched_slices > steps);
  CHECK(ioctl_slices > 0);
  CHECK(counters >= 2);
  for (const auto& [id, n] : async_balance) CHECK(n == 0);
  // Every pid used has a process track name; slices on one track nest (no partial overlap).
  for (const auto& [key, v] : slices) {
    CHECK(named_pids.count(key.first) == 1);
    auto s = v;
    std::sort(s.begin(), s.end(), [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> stack;
    for (const auto& [b, e] : s) {
      while (!stack.empty() && stack.back() <= b + 1e-3) stack.pop_back();
      if (!stack.empty()) {
        INFO("track " << key.first << "/" << key.second << " slice " << b << ".." << e << " in ..." << stack.back());
        CHECK(e <= stack.back() + 1e-3);
      }
      stack.push_back(e);
    }
  }
  CHECK(t["metadata"]["straggler_rank"] == r.job.verdict.straggler_rank);
}

TEST_CASE("export: HTML is self-contained and embeds the same analysis", "[export]") {
  const auto& r = straggler();
  auto html = html_report(r);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // Nothing to fetch: no external scripts, styles, images or links.
  CHECK(html.find(" src=") == std::string::npos);
  CHECK(html.find(" href=") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  CHECK(html.find(html_escape(r.job.verdict.headline)) != std::string::npos);
  for (const auto& e : r.job.verdict.evidence) CHECK(html.find("<li>" + html_escape(e) + "</li>") != std::string::npos);
  // The embedded data is the job JSON of this very report.
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  size_t a = html.find(open);
  REQUIRE(a != std::string::npos);
  a += open.size();
  size_t b = html.find("</script>", a);
  REQUIRE(b != std::string::npos);
  auto data = json::parse(html.substr(a, b - a));
  CHECK(data["job"] == json::parse(job_json(r.job).dump()));
  CHECK(data["categories"].size() == kCategories);
  CHECK(html.find("class=\"straggler\"") != std::string::npos);
}

TEST_CASE("export: the what-if says the same in the text, JSON and HTML, top fix first", "[export]") {
  const auto& r = straggler();
  const auto& w = r.job.what_if;
  REQUIRE_FALSE(w.items.empty());
  REQUIRE(w.items.front().helps);
  const json j = job_json(r.job)["what_if"];
  REQUIRE(j.size() == w.items.size());
  CHECK(j[0]["fix"] == w.items.front().fix);
  CHECK(j[0]["rank"] == r.job.verdict.straggler_rank);  // the straggler's own fix comes first
  const std::string text = format_report_text(r, {false, 0});
  const size_t at = text.find("What if (");
  REQUIRE(at != std::string::npos);
  CHECK(text.find("  1. fix: " + w.items.front().fix + " -> step -", at) != std::string::npos);
  const std::string html = html_report(r);
  const size_t table = html.find("<table id=\"what-if\">");
  REQUIRE(table != std::string::npos);
  size_t rows = 0;
  for (size_t p = html.find("<tr><td>", table); p != std::string::npos && p < html.find("</table>", table);
       p = html.find("<tr><td>", p + 1))
    ++rows;
  CHECK(rows == w.items.size());
}

TEST_CASE("export: HTML escapes what it embeds", "[export]") {
  CHECK(html_escape("<b a=\"1\">&'") == "&lt;b a=&quot;1&quot;&gt;&amp;&#39;");
  SessionReport r;
  r.job.verdict.headline = "</script><script>alert(1)</script>";
  r.job.verdict.evidence = {"<img src=x onerror=alert(1)>"};
  RankResult rk;
  rk.comm = "</script><b>";
  r.job.ranks.push_back(rk);
  auto html = html_report(r);
  CHECK(html.find("<script>alert(1)") == std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  // Exactly our two script elements.
  size_t n = 0;
  for (size_t p = html.find("<script"); p != std::string::npos; p = html.find("<script", p + 1)) ++n;
  CHECK(n == 2);
}

TEST_CASE("export: top frame shows rate, per-rank bars, verdict and drops within the width", "[export]") {
  const auto& r = straggler();
  TopFrameState st;
  st.last_wall_s = r.wall_s - 2.0;
  size_t steps = 0;
  for (const auto& rk : r.job.ranks) steps += rk.steps.size();
  st.last_steps = steps - 4;  // 4 steps in 2 s
  TopView view;
  view.width = 80;
  auto frame = render_top_frame(r, view, st);
  CHECK(frame.find("2.00 steps/s") != std::string::npos);
  CHECK(frame.find("verdict: " + r.job.verdict.headline.substr(0, 30)) != std::string::npos);
  CHECK(frame.find("dropped 0") != std::string::npos);
  CHECK(st.last_steps == steps);
  CHECK(frame.find("q or Ctrl-C quits") != std::string::npos);
  // After q: the frame says what it waits for instead.
  TopView stopping = view;
  stopping.stopping = "stopping the job: SIGTERM sent, SIGKILL in 8 s";
  auto f2 = render_top_frame(r, stopping, st);
  CHECK(f2.find("stopping the job: SIGTERM sent, SIGKILL in 8 s") != std::string::npos);
  CHECK(f2.find("q or Ctrl-C quits") == std::string::npos);
  int bars = 0, marked = 0;
  for (const auto& l : lines_of(frame)) {
    CHECK(columns(l) <= 80);
    if (std::regex_search(l, std::regex("^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+  [DLMCHX.]{10,}"))) ++bars;
    if (l.find("<-straggler") != std::string::npos) ++marked;
  }
  CHECK(bars == static_cast<int>(r.job.ranks.size()));
  CHECK(marked == (r.job.verdict.straggler_rank >= 0 ? 1 : 0));
  view.color = true;
  CHECK(render_top_frame(r, view, st).find("\x1b[") != std::string::npos);
  // A small terminal gets a frame no taller than it.
  view.height = 6;
  CHECK(lines_of(render_top_frame(r, view, st)).size() <= 6);
}
