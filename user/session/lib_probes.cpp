// SPDX-License-Identifier: Apache-2.0
#include "session/lib_probes.h"

#include <algorithm>

#include "loader/tracer.h"
#include "session/session.h"
#include "util/sys_root.h"

namespace steptrace {

int attach_lib_probes(BpfTracer& tracer, const std::string& path, std::vector<std::string>* warnings) {
  struct Probe {
    const char* func;
    uint32_t id;
  };
  const bool marker = path.find("steptrace_marker") != std::string::npos;
  std::vector<Probe> probes;
  if (marker) probes = {{"steptrace_step", ST_UP_STEP_MARKER}};
  else
    probes = {{"nrt_execute", ST_UP_NRT_EXECUTE},
              {"nrt_tensor_write", ST_UP_NRT_TENSOR_WRITE},
              {"nrt_tensor_read", ST_UP_NRT_TENSOR_READ}};
  int attached = 0;
  for (const auto& p : probes) {
    if (auto a = tracer.attach_uprobe(path, p.func, p.id, false); !a) {
      warnings->push_back(a.error().message);
      continue;
    }
    // The marker is a point in time; runtime calls are spans (entry + return).
    if (!marker)
      if (auto r = tracer.attach_uprobe(path, p.func, p.id, true); !r) warnings->push_back(r.error().message);
    ++attached;
  }
  return attached;
}

void LibScanQueue::add(uint32_t pid, uint64_t now_ns) {
  if (pending_.size() >= max_pending_) return;
  pending_.emplace(pid, State{now_ns, now_ns, 20'000'000ull});
}

void LibScanQueue::scan(uint64_t now, const std::string& proc_root,
                        const std::function<void(const std::string&)>& found) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto& st = it->second;
    if (now < st.next_scan_ns) {
      ++it;
      continue;
    }
    auto maps = read_small_file(proc_root + "/" + std::to_string(it->first) + "/maps", 8 << 20);
    if (!maps) {
      it = pending_.erase(it);
      continue;
    }
    bool found_runtime = false;
    for (const auto& path : find_probe_libs(*maps)) {
      found(path);
      if (path.find("libnrt") != std::string::npos) found_runtime = true;
    }
    if (found_runtime || now - st.first_seen_ns > 5'000'000'000ull) {
      it = pending_.erase(it);
      continue;
    }
    st.interval_ns = std::min<uint64_t>(st.interval_ns * 2, 500'000'000ull);
    st.next_scan_ns = now + st.interval_ns;
    ++it;
  }
}

}  // namespace steptrace
