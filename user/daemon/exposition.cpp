// SPDX-License-Identifier: Apache-2.0
#include "daemon/exposition.h"

#include <fmt/core.h>

#include <cmath>

#include "util/text.h"

namespace steptrace::daemon {

std::string escape_label_value(std::string_view raw) {
  // Prometheus rejects the whole scrape on one label value that is not UTF-8.
  const std::string v = valid_utf8(raw);
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{:.9g}", v);
}

void Exposition::family(std::string_view name, std::string_view type, std::string_view help) {
  std::string h;
  for (char c : help) {
    if (c == '\\') h += "\\\\";
    else if (c == '\n') h += "\\n";
    else h += c;
  }
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, h, name, type);
}

void Exposition::sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      out_ += escape_label_value(v);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

}  // namespace steptrace::daemon
