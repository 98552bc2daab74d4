// SPDX-License-Identifier: Apache-2.0
// DropStats totals, apart from tracer.cpp so that replay, the analysis and the
// report fuzzer (tools/fuzz/run-report.sh) link without libbpf.
#include "loader/tracer.h"

namespace steptrace {

uint64_t DropStats::total_emitted() const {
  uint64_t t = 0;
  for (auto v : emitted) t += v;
  return t;
}

uint64_t DropStats::total_dropped() const {
  uint64_t t = 0;
  for (auto v : dropped) t += v;
  return t;
}

}  // namespace steptrace
