// SPDX-License-Identifier: Apache-2.0
#include "attribution/numa_placement.h"

#include <algorithm>

#include "timeline/timeline_store.h"

namespace steptrace {

int main_device(const ThreadTimeline& main) {
  std::map<int, uint64_t> calls;
  for (const auto& s : main.spans)
    if (s.kind == SpanKind::ioctl && s.dev != 0xffff) ++calls[s.dev];
  int best = -1;
  uint64_t n = 0;
  for (const auto& [dev, c] : calls)
    if (c > n) best = dev, n = c;
  return best;
}

DevicePlacement place_device(const ThreadTimeline& main, const signals::NumaTopology& topo) {
  DevicePlacement p;
  p.device = main_device(main);
  if (auto it = topo.device_node.find(p.device); it != topo.device_node.end() && topo.multi_node())
    p.device_node = it->second;
  if (auto it = topo.device_bdf.find(p.device); it != topo.device_bdf.end()) p.device_bdf = it->second;
  return p;
}

void on_cpu_by_node(const ThreadTimeline& main, uint64_t s, uint64_t e, int device_node,
                    const signals::NumaTopology& topo, uint64_t* on_cpu_ns, uint64_t* remote_ns) {
  auto g = std::partition_point(main.segs.begin(), main.segs.end(), [s](const StateSeg& x) { return x.end <= s; });
  for (; g != main.segs.end() && g->start < e; ++g) {
    if (g->state != ThreadState::running) continue;
    const uint64_t a = std::max(g->start, s), b = std::min(g->end, e);
    if (b <= a) continue;
    *on_cpu_ns += b - a;
    const int node = g->cpu == kNoCpu ? -1 : topo.node_of_cpu(g->cpu);
    if (device_node >= 0 && node >= 0 && node != device_node) *remote_ns += b - a;
  }
}

}  // namespace steptrace
