// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition format 0.0.4: HELP/TYPE once per family, label
// values escaped (\\, \", \n), numbers in Go's float syntax (+Inf, NaN).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace steptrace::daemon {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

class Exposition {
 public:
  // Starts a metric family; `type` is counter, gauge or histogram.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample; `name` is the family name plus any suffix (_bucket, _sum, _count).
  void sample(std::string_view name, const Labels& labels, double value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

std::string escape_label_value(std::string_view v);
std::string format_value(double v);

}  // namespace steptrace::daemon
