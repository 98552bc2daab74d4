// SPDX-License-Identifier: Apache-2.0
#include "export/what_if_view.h"

#include <fmt/core.h>

#include "export/html_report.h"

namespace steptrace {

namespace {
double ms(double ns) { return ns / 1e6; }
}  // namespace

nlohmann::json what_if_json(const WhatIfReport& w) {
  using nlohmann::json;
  json a = json::array();
  for (const auto& x : w.items)
    a.push_back({{"fix", x.fix},
                 {"kind", std::string(what_if_kind_name(x.kind))},
                 {"rank", x.rank >= 0 ? json(x.rank) : json(nullptr)},
                 {"category", x.category ? json(std::string(category_name(*x.category))) : json(nullptr)},
                 {"saving_ms", ms(x.saving_ns)},
                 {"saving_pct", x.saving_pct},
                 {"predicted_step_ms", ms(x.predicted_step_ns)},
                 {"helps", x.helps},
                 {"reason", x.reason}});
  return a;
}

WhatIfText what_if_text(const WhatIfReport& w, size_t max_helps) {
  WhatIfText t;
  if (!w.steps) return t;
  t.title = fmt::format("What if (each step's critical path: {} counted steps{}, mean {:.1f} ms)", w.steps,
                        w.coupled_steps ? fmt::format(", {} coupled by a collective", w.coupled_steps) : "",
                        ms(w.step_ns));
  size_t n = 0;
  for (const auto& x : w.items) {
    if (x.helps) {
      if (++n > max_helps) continue;
      t.lines.push_back(fmt::format("{}. fix: {} -> step -{:.1f} ms (-{:.1f} %) to {:.1f} ms", n, x.fix,
                                    ms(x.saving_ns), x.saving_pct, ms(x.predicted_step_ns)));
    } else {
      t.lines.push_back(fmt::format("would not help: {} (saves {:.1f} %): {}", x.fix, x.saving_pct, x.reason));
    }
  }
  if (n > max_helps)
    t.lines.push_back(fmt::format("({} more fix{} in the JSON report)", n - max_helps, n - max_helps > 1 ? "es" : ""));
  if (n == 0) t.lines.insert(t.lines.begin(), "no single fix saves 1 % of the step or more");
  return t;
}

std::string what_if_html(const WhatIfReport& w) {
  if (!w.steps) return "";
  std::string o = fmt::format("<h2>What if</h2>\n<p class=\"meta\">Predicted from each step's critical path across "
                              "ranks; {} counted steps, mean {:.2f} ms.</p>\n",
                              w.steps, ms(w.step_ns));
  o += "<table id=\"what-if\"><tr><th>fix</th><th>saves ms</th><th>saves %</th><th>step ms</th><th>helps</th>"
       "<th>why</th></tr>\n";
  for (const auto& x : w.items)
    o += fmt::format("<tr><td>{}</td><td>{:.2f}</td><td>{:.1f}</td><td>{:.2f}</td><td>{}</td>"
                     "<td style=\"text-align:left\">{}</td></tr>\n",
                     html_escape(x.fix), ms(x.saving_ns), x.saving_pct, ms(x.predicted_step_ns),
                     x.helps ? "yes" : "would not help", html_escape(x.reason));
  if (w.items.empty()) o += "<tr><td colspan=\"6\">no single fix saves 1 % of the step or more</td></tr>\n";
  o += "</table>\n";
  return o;
}

}  // namespace steptrace
