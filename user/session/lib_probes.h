// SPDX-License-Identifier: Apache-2.0
// Runtime and step-marker libraries in traced processes: which processes
// still need their memory maps scanned, and the uprobes a found library
// gets. Shared by `run`/`attach` sessions and the daemon.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace steptrace {

class BpfTracer;

// Attaches the uprobes `path` offers: entry and return of nrt_execute,
// nrt_tensor_write and nrt_tensor_read in a runtime library, the entry of
// steptrace_step in the marker library. A probe that fails adds a line to
// *warnings; returns how many functions were probed.
int attach_lib_probes(BpfTracer& tracer, const std::string& path, std::vector<std::string>* warnings);

// A process maps libnrt a little after exec: its maps are rescanned with
// backoff (20 ms doubling to 500 ms) until the runtime library shows up or
// 5 s have passed. At most `max_pending` processes wait at once.
class LibScanQueue {
 public:
  explicit LibScanQueue(size_t max_pending = 4096) : max_pending_(max_pending) {}
  void add(uint32_t pid, uint64_t now_ns);
  bool empty() const { return pending_.empty(); }
  void clear() { pending_.clear(); }
  // Scans the processes that are due under proc_root; found(path) for each
  // runtime or marker library mapped. Gone processes are dropped.
  void scan(uint64_t now_ns, const std::string& proc_root, const std::function<void(const std::string&)>& found);

 private:
  struct State {
    uint64_t first_seen_ns, next_scan_ns, interval_ns;
  };
  size_t max_pending_;
  std::map<uint32_t, State> pending_;
};

}  // namespace steptrace
