// SPDX-License-Identifier: Apache-2.0
#include "export/html_report.h"

#include "attribution/host_steals.h"
#include "export/flame_svg.h"
#include "export/provenance.h"
#include "util/json_text.h"

#include <fmt/core.h>

#include "export/report_stats.h"
#include "export/summary.h"
#include "export/what_if_view.h"

namespace steptrace {

// No "<", ">" or "&" survive (they can only appear inside strings, where \u
// escapes mean the same).
std::string script_safe_json(const nlohmann::json& j) {
  std::string s = json_text(j);
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    if (c == '<') o += "\\u003c";
    else if (c == '>') o += "\\u003e";
    else if (c == '&') o += "\\u0026";
    else o += c;
  }
  return o;
}

namespace {

const char* kStyle = R"CSS(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.verdict{font-size:18px;font-weight:600;padding:12px 16px;border-left:6px solid #e15759;background:#fdf3f3}
.incomplete{color:#b00;font-weight:600}
.meta{color:#666;font-size:12px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:3px 8px;text-align:right;border-bottom:1px solid #eee}
th{background:#f6f6f6} td:first-child,th:first-child{text-align:left}
tr.straggler td{background:#fff1d6;font-weight:600}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}
#chart svg{border:1px solid #eee;background:#fff}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:6px 8px;
border-radius:4px;display:none;white-space:pre}
)CSS";

// Builds the step chart and rank bars from the embedded report.
const char* kScript = R"JS(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var job = data.job, cats = data.categories, colors = data.colors;
  var NS = 'http://www.w3.org/2000/svg';
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  var tip = document.getElementById('tip');
  function showTip(ev, text) {
    tip.textContent = text; tip.style.display = 'block';
    tip.style.left = (ev.clientX + 12) + 'px'; tip.style.top = (ev.clientY + 12) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }
  var legend = document.getElementById('legend');
  cats.forEach(function (c, i) {
    var s = document.createElement('span');
    var sw = document.createElement('i'); sw.style.background = colors[i];
    s.appendChild(sw); s.appendChild(document.createTextNode(c)); legend.appendChild(s);
  });

  // Stacked bars: one group per rank, one bar per step, height = step duration.
  var chart = document.getElementById('chart');
  var maxDur = 1, nSteps = 0;
  job.ranks.forEach(function (r) {
    r.steps.forEach(function (s) { maxDur = Math.max(maxDur, s.duration_ns); nSteps++; });
  });
  var H = 260, top = 10, left = 60, bw = Math.max(2, Math.min(18, Math.floor(1000 / Math.max(1, nSteps))));
  var gap = bw > 4 ? 1 : 0, rankGap = 24;
  var W = left + nSteps * (bw + gap) + job.ranks.length * rankGap + 20;
  var svg = el('svg', {width: W, height: H + top + 40, id: 'steps-svg', role: 'img'}, chart);
  for (var t = 0; t <= 4; t++) {
    var y = top + H - H * t / 4;
    el('line', {x1: left - 4, x2: W, y1: y, y2: y, stroke: '#eee'}, svg);
    el('text', {x: left - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 10, fill: '#666'}, svg)
        .textContent = (maxDur * t / 4 / 1e6).toFixed(1) + ' ms';
  }
  var x = left, rendered = 0;
  job.ranks.forEach(function (r) {
    var x0 = x;
    r.steps.forEach(function (s) {
      var y = top + H, g = el('g', {'class': 'step', 'data-rank': r.rank, 'data-step': s.index}, svg);
      var lines = ['rank ' + r.rank + ' step ' + s.index + ': ' + (s.duration_ns / 1e6).toFixed(2) + ' ms'];
      cats.forEach(function (c, i) {
        var ns = s.categories[c] || 0, h = H * ns / maxDur;
        if (ns > 0) lines.push(c + ': ' + (ns / 1e6).toFixed(2) + ' ms');
        if (h <= 0) return;
        y -= h;
        el('rect', {'class': 'seg', x: x, y: y, width: bw, height: h, fill: colors[i]}, g);
      });
      if (s.index < job.skipped_warmup_steps) g.setAttribute('opacity', '0.45');
      var text = lines.join('\n') + '\ngating: ' + s.gating;
      g.addEventListener('mousemove', function (ev) { showTip(ev, text); });
      g.addEventListener('mouseleave', hideTip);
      x += bw + gap; rendered++;
    });
    el('text', {x: x0, y: top + H + 16, 'font-size': 11, fill: r.rank === job.verdict.straggler_rank ? '#b00' : '#333'},
       svg).textContent = 'rank ' + r.rank + (r.rank === job.verdict.straggler_rank ? ' (straggler)' : '');
    x += rankGap;
  });

  // Per-rank comparison: 100% bars of the share of each category.
  var rc = document.getElementById('rank-bars');
  var RW = 700, RH = 22;
  var rsvg = el('svg', {width: RW + 140, height: job.ranks.length * (RH + 6) + 4, id: 'ranks-svg'}, rc);
  job.ranks.forEach(function (r, k) {
    var y = 2 + k * (RH + 6), xx = 120, total = r.counted_ns || 1;
    el('text', {x: 0, y: y + 15, 'font-size': 12, fill: r.rank === job.verdict.straggler_rank ? '#b00' : '#333'},
       rsvg).textContent = 'rank ' + r.rank + (r.rank === job.verdict.straggler_rank ? ' straggler' : '');
    cats.forEach(function (c, i) {
      var w = RW * (r.totals[c] || 0) / total;
      if (w <= 0) return;
      var rect = el('rect', {'class': 'rank-seg', x: xx, y: y, width: w, height: RH, fill: colors[i]}, rsvg);
      var text = 'rank ' + r.rank + ' ' + c + ': ' + (100 * (r.totals[c] || 0) / total).toFixed(1) + '%';
      rect.addEventListener('mousemove', function (ev) { showTip(ev, text); });
      rect.addEventListener('mouseleave', hideTip);
      xx += w;
    });
  });
  document.body.setAttribute('data-steps-rendered', String(rendered));
})();
)JS";

}  // namespace

const char* html_report_css() { return kStyle; }

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string html_report(const SessionReport& r) {
  const auto& job = r.job;
  const auto& v = job.verdict;
  nlohmann::json data;
  data["job"] = job_json(job);
  data["categories"] = nlohmann::json::array();
  data["colors"] = nlohmann::json::array();
  for (size_t c = 0; c < kCategories; ++c) {
    data["categories"].push_back(std::string(kCategoryNames[c]));
    data["colors"].push_back(category_color(c));
  }

  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  o += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'; img-src data:\">\n";
  o += fmt::format("<title>steptrace: {}</title>\n<style>{}</style></head><body>\n", html_escape(v.headline), kStyle);
  o += "<h1>steptrace report</h1>\n";
  o += fmt::format("<p class=\"meta\">{:.2f} s traced, {} records, {} dropped, {} ranks</p>\n", r.wall_s, r.records,
                   r.drops.total_dropped(), job.ranks.size());
  {
    const auto t0 = wall_clock_text(r.source, r.window_start_ns);
    o += fmt::format("<p class=\"meta\" id=\"source\">host {}, kernel {}, steptrace {}{}</p>\n",
                     html_escape(r.source.host), html_escape(r.source.kernel), html_escape(r.source.recorded_by),
                     t0.empty() ? "" : ", t0 " + html_escape(t0) + " UTC");
  }
  o += fmt::format("<div class=\"verdict\" id=\"verdict\">{}</div>\n",
                   html_escape(v.headline.empty() ? "no verdict" : v.headline));
  if (r.drops.incomplete())
    o += fmt::format("<p class=\"incomplete\" id=\"incomplete\">INCOMPLETE: {}</p>\n",
                     html_escape(incomplete_reason(r.drops)));
  if (!r.capture_end.empty())
    o += fmt::format("<p class=\"incomplete\" id=\"capture-end\">INCOMPLETE: the capture ended early ({})</p>\n",
                     html_escape(r.capture_end));
  if (!v.recommendation.empty())
    o += fmt::format("<p>Confidence {:.0f}%. {}</p>\n", 100 * v.confidence, html_escape(v.recommendation));

  o += "<h2>Evidence</h2>\n<ul id=\"evidence\">\n";
  for (const auto& e : v.evidence) o += "<li>" + html_escape(e) + "</li>\n";
  o += "</ul>\n";
  o += what_if_html(job.what_if);
  if (!job.host_steals.findings.empty()) {
    o += "<h2>What the host took from the steps</h2>\n<table id=\"host-steals\"><tr><th>rank</th><th>step ms</th>"
         "<th>throttled</th><th>loaders throttled</th><th>loaders reclaim</th><th>reclaim</th><th>irq</th>"
         "<th>softirq</th></tr>\n";
    for (const auto& s : job.host_steals.ranks)
      o += fmt::format("<tr><td>{}</td><td>{:.1f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td>"
                       "<td>{:.2f}</td><td>{:.2f}</td></tr>\n",
                       s.rank, s.step_ns / 1e6, s.throttled_ns / 1e6, s.data_throttled_ns / 1e6,
                       s.data_reclaim_ns / 1e6, s.reclaim_ns / 1e6, s.irq_ns / 1e6, s.softirq_ns / 1e6);
    o += "</table>\n<ul>\n";
    for (const auto& f : job.host_steals.findings)
      o += "<li>" + html_escape(f.text + ": " + f.recommendation) + "</li>\n";
    o += "</ul>\n";
  }

  o += profile_html(r, named_stacks(r));
  o += "<h2>Every step's breakdown</h2>\n<div class=\"legend\" id=\"legend\"></div>\n<div id=\"chart\"></div>\n";
  o += "<noscript><p>The charts need JavaScript; the tables below do not.</p></noscript>\n";

  o += "<h2>Ranks</h2>\n<div id=\"rank-bars\"></div>\n<table id=\"ranks\"><tr><th>rank</th><th>pid</th><th>steps</th>"
       "<th>mean ms</th>";
  for (size_t c = 0; c < kCategories; ++c)
    o += fmt::format("<th title=\"{}\">{}</th>", kCategoryNames[c], category_label(c));
  o += "<th>last at collective</th></tr>\n";
  for (const auto& rk : job.ranks) {
    const uint64_t n = counted_steps(job, rk);
    auto sh = rank_shares(rk);
    bool strag = rk.rank == v.straggler_rank;
    o += fmt::format("<tr{}><td>{}{}</td><td>{}</td><td>{}</td><td>{:.2f}</td>", strag ? " class=\"straggler\"" : "",
                     rk.rank, strag ? " (straggler)" : "", rk.pid, rk.steps_total,
                     n ? static_cast<double>(rk.counted_ns) / n / 1e6 : 0.0);
    for (size_t c = 0; c < kCategories; ++c) o += fmt::format("<td>{:.1f}%</td>", 100 * sh[c]);
    o += fmt::format("<td>{} steps</td></tr>\n", rk.straggler_steps);
  }
  o += "</table>\n";

  auto ss = step_stats(job);
  o += fmt::format("<h2>Percentiles ({} counted steps, ms{})</h2>\n<table id=\"percentiles\"><tr><th>category</th>"
                   "<th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>\n",
                   ss.counted, ss.approximate ? "; older steps from a histogram, within 1 %" : "");
  auto row = [&](std::string_view name, const Percentiles& p) {
    o += fmt::format("<tr><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td></tr>\n", name,
                     p.p50 / 1e6, p.p90 / 1e6, p.p99 / 1e6, p.max / 1e6);
  };
  row("step", ss.step);
  for (size_t c = 0; c < kCategories; ++c) row(kCategoryNames[c], ss.category[c]);
  o += "</table>\n";

  o += "<h2>Events</h2>\n<table id=\"events\"><tr><th>class</th><th>emitted</th><th>dropped</th></tr>\n";
  for (int k = 1; k < ST_EV_KIND_MAX; ++k) {
    if (r.drops.emitted[k] == 0 && r.drops.dropped[k] == 0) continue;
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", kind_name(static_cast<uint32_t>(k)),
                     r.drops.emitted[k], r.drops.dropped[k]);
  }
  o += "</table>\n";
  std::string lost;
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    if (r.drops.losses[k])
      lost += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", loss_name(k), r.drops.losses[k],
                          html_escape(std::string(loss_text(k))));
  if (!lost.empty())
    o += "<table id=\"losses\"><tr><th>lost in the kernel</th><th>count</th><th>meaning</th></tr>\n" + lost +
         "</table>\n";
  o += fmt::format("<p class=\"meta\">tracer CPU {:.3f} s</p>\n", r.tracer_cpu_s);
  o += "<div id=\"tip\"></div>\n";
  o += "<script type=\"application/json\" id=\"report-data\">" + script_safe_json(data) + "</script>\n";
  o += std::string("<script>") + kScript + "</script>\n</body></html>\n";
  return o;
}

}  // namespace steptrace
