// SPDX-License-Identifier: Apache-2.0
#include "multinode/job_html.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>

#include "export/html_report.h"
#include "export/report_stats.h"
#include "multinode/job_view.h"

namespace steptrace {

namespace {

// On top of the one-capture page's stylesheet.
const char* kStyle = R"CSS(
tr.culprit td{background:#fff1d6;font-weight:600}
#timeline svg{border:1px solid #eee;background:#fff}
)CSS";

// Draws one row per rank (grouped by node) on the job's clock.
const char* kScript = R"JS(
(function () {
  'use strict';
  var d = JSON.parse(document.getElementById('job-data').textContent);
  var NS = 'http://www.w3.org/2000/svg';
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  var legend = document.getElementById('legend');
  d.categories.forEach(function (c, i) {
    var s = document.createElement('span'), sw = document.createElement('i');
    sw.style.background = d.colors[i];
    s.appendChild(sw);
    s.appendChild(document.createTextNode(c));
    legend.appendChild(s);
  });
  var W = 1150, L = 150, RH = 16, GAP = 4, span = Math.max(d.span_ms, 1e-3);
  var H = d.ranks.length * (RH + GAP) + 30;
  var svg = el('svg', {width: W, height: H}, document.getElementById('timeline'));
  var drawn = 0;
  d.ranks.forEach(function (r, i) {
    var y = 10 + i * (RH + GAP);
    var label = el('text', {x: 4, y: y + RH - 4, 'font-size': 11}, svg);
    label.textContent = 'node ' + r.node + ' rank ' + r.rank + (r.culprit ? ' (culprit)' : '');
    r.steps.forEach(function (s) {
      var x = L + (W - L - 10) * s[0] / span, w = Math.max((W - L - 10) * s[1] / span, 0.5);
      var rect = el('rect', {x: x, y: y, width: w, height: RH, fill: d.colors[s[2]]}, svg);
      var t = el('title', {}, rect);
      t.textContent = 'rank ' + r.rank + ': ' + s[1].toFixed(2) + ' ms at ' + s[0].toFixed(2) + ' ms, ' +
                      d.categories[s[2]];
      ++drawn;
    });
  });
  var axis = el('text', {x: L, y: H - 6, 'font-size': 11}, svg);
  axis.textContent = '0 ms (job time)';
  var end = el('text', {x: W - 10, y: H - 6, 'font-size': 11, 'text-anchor': 'end'}, svg);
  end.textContent = span.toFixed(1) + ' ms';
  document.body.setAttribute('data-steps-rendered', String(drawn));
})();
)JS";

// Every rank's steps on the job clock, in ms from the earliest step.
nlohmann::json timeline_json(const JobReport& job) {
  int64_t t0 = std::numeric_limits<int64_t>::max(), t1 = std::numeric_limits<int64_t>::min();
  for (const auto& r : job.ranks)
    if (r.res && !r.res->steps.empty()) {
      const HostAlignment& c = job.hosts[r.host].clock;
      t0 = std::min(t0, c.to_job_ns(r.res->steps.front().start_ns));
      t1 = std::max(t1, c.to_job_ns(r.res->steps.back().end_ns));
    }
  nlohmann::json d;
  d["categories"] = nlohmann::json::array();
  d["colors"] = nlohmann::json::array();
  for (size_t c = 0; c < kCategories; ++c) {
    d["categories"].push_back(kCategoryNames[c]);
    d["colors"].push_back(category_color(c));
  }
  d["span_ms"] = t1 > t0 ? static_cast<double>(t1 - t0) / 1e6 : 0.0;
  d["ranks"] = nlohmann::json::array();
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const JobRank& r = job.ranks[i];
    nlohmann::json steps = nlohmann::json::array();
    if (r.res) {
      const auto& all = r.res->steps;
      const size_t stride = all.size() / kJobHtmlStepsPerRank + 1;
      const HostAlignment& c = job.hosts[r.host].clock;
      for (size_t k = 0; k < all.size(); k += stride) {
        const auto& st = all[k];
        steps.push_back({static_cast<double>(c.to_job_ns(st.start_ns) - t0) / 1e6,
                         static_cast<double>(st.duration()) / 1e6, static_cast<int>(st.gating)});
      }
    }
    d["ranks"].push_back({{"rank", r.global_rank},
                          {"node", r.node},
                          {"culprit", job.culprit.found && job.culprit.rank == i},
                          {"steps", std::move(steps)}});
  }
  return d;
}

std::string tables_html(const JobReport& job) {
  std::string o = "<h2>Nodes</h2>\n<table id=\"nodes\"><tr><th>node</th><th>hosts</th><th>ranks</th><th>step ms</th>"
                  "<th>collective ms/rank</th><th>steps held back</th></tr>\n";
  for (const auto& n : job.nodes) {
    std::vector<int> ranks;
    for (size_t i : n.ranks) ranks.push_back(job.ranks[i].global_rank);
    std::string hosts;
    for (size_t h : n.hosts) hosts += (hosts.empty() ? "" : ", ") + html_escape(job.hosts[h].hostname);
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{}</td></tr>\n", n.node,
                     hosts, rank_ranges(ranks), static_cast<double>(n.mean_step_ns) / 1e6,
                     static_cast<double>(n.mean_collective_ns) / 1e6, n.last_steps);
  }
  o += "</table>\n<h2>Ranks</h2>\n<table id=\"ranks\"><tr><th>rank</th><th>node</th><th>host</th><th>pid</th>"
       "<th>step ms</th>";
  for (size_t c = 0; c < kCategories; ++c) o += fmt::format("<th>{}</th>", kCategoryNames[c]);
  o += "<th>steps held back</th></tr>\n";
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const JobRank& r = job.ranks[i];
    const bool culprit = job.culprit.found && job.culprit.rank == i;
    const uint64_t n = r.matched_steps ? r.matched_steps : 1;
    o += fmt::format("<tr{}><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td>",
                     culprit ? " class=\"culprit\"" : "", r.global_rank, culprit ? " (culprit)" : "", r.node,
                     html_escape(job.hosts[r.host].hostname), r.pid, static_cast<double>(r.step_ns_sum / n) / 1e6);
    for (size_t c = 0; c < kCategories; ++c)
      o += fmt::format("<td>{:.1f}%</td>",
                       r.step_ns_sum ? 100.0 * static_cast<double>(r.ns[c]) / static_cast<double>(r.step_ns_sum) : 0.0);
    o += fmt::format("<td>{}</td></tr>\n", r.last_steps);
  }
  return o + "</table>\n";
}

}  // namespace

std::string job_html(const JobReport& job) {
  std::string o = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n";
  o += fmt::format("<title>steptrace job: {}</title>\n<style>{}</style></head><body>\n", html_escape(job.headline),
                   std::string(html_report_css()) + kStyle);
  o += fmt::format("<h1>steptrace job report{}</h1>\n<p class=\"meta\">{} host capture(s), {} rank(s){}</p>\n",
                   job.job_id.empty() ? "" : ": " + html_escape(job.job_id), job.hosts.size(), job.ranks.size(),
                   job.world_size > 0 ? fmt::format(" of WORLD_SIZE {}", job.world_size) : "");
  o += "<div class=\"verdict\" id=\"verdict\">" + html_escape(job.headline) + "</div>\n<ul id=\"evidence\">\n";
  for (const auto& e : job.evidence) o += "<li>" + html_escape(e) + "</li>\n";
  o += "</ul>\n";
  for (const auto& w : job.warnings) o += "<p class=\"meta\">warning: " + html_escape(w) + "</p>\n";
  o += "<h2>Clocks</h2>\n<p id=\"clocks\">" + html_escape(job_alignment_text(job)) + "</p>\n<ul>\n";
  for (size_t h = 0; h < job.hosts.size(); ++h)
    o += fmt::format("<li>host {} {} ({}): {}</li>\n", h, html_escape(job.hosts[h].hostname),
                     html_escape(job.hosts[h].path), html_escape(job_host_clock_text(job.hosts[h])));
  o += "</ul>\n<h2>Every rank's steps on the job's clock</h2>\n<div class=\"legend\" id=\"legend\"></div>\n"
       "<div id=\"timeline\"></div>\n<noscript><p>The timeline needs JavaScript; the tables below do not.</p>"
       "</noscript>\n";
  o += tables_html(job);
  o += "<script type=\"application/json\" id=\"job-data\">" + script_safe_json(timeline_json(job)) + "</script>\n";
  o += std::string("<script>") + kScript + "</script>\n</body></html>\n";
  return o;
}

}  // namespace steptrace
