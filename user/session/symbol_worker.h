// SPDX-License-Identifier: Apache-2.0
// Names for the stack samples' addresses, gathered while the processes live:
// a process's memory map is read (and each mapped file's symbols loaded, once
// per file) on this worker's own thread at its first sample and again at its
// first sample after an exec, never on the drain thread. After tracing, every
// address of every stack is named from those snapshots, and a capture gets
// the names as "symbols" notes, so a replay elsewhere shows the same frames.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "profile/cpu_samples.h"
#include "util/sys_root.h"

namespace steptrace {

namespace symbols {
class Symbolizer;
}

class SymbolWorker {
 public:
  explicit SymbolWorker(const SysRoot& root);
  ~SymbolWorker();
  SymbolWorker(const SymbolWorker&) = delete;
  SymbolWorker& operator=(const SymbolWorker&) = delete;

  // A sample of pid arrived: snapshot its map unless one is current.
  void sampled(uint32_t pid);
  // pid exec'd: its next sample takes a new snapshot.
  void exec(uint32_t pid) {
    std::lock_guard<std::mutex> l(mu_);
    current_.erase(pid);
  }
  // Ends the worker (what is queued is done first) and names every address
  // of the store's stacks. Returns the number of addresses named.
  size_t name_stacks(SampleStore& store);

 private:
  void loop();

  std::unique_ptr<symbols::Symbolizer> sym_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint32_t> queue_;
  std::set<uint32_t> current_;  // pids with a snapshot taken since their last exec (or queued)
  bool stop_ = false;
  std::thread thread_;
};

// The names as user notes ({"note":"symbols","names":[[pid, ip, name]...]}),
// each under the note size limit.
std::vector<nlohmann::json> symbol_notes(const SampleStore& store);

}  // namespace steptrace
