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
#include <functional>
#include <map>
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
struct PythonProcess;
}

class SymbolWorker {
 public:
  // Told, on the worker's thread, of each CPython process found (its frame
  // layout for the sampler's map) and of each that exec'd (null).
  using PythonHook = std::function<void(uint32_t pid, const st_py_proc* layout)>;
  explicit SymbolWorker(const SysRoot& root, PythonHook on_python = {});
  ~SymbolWorker();
  SymbolWorker(const SymbolWorker&) = delete;
  SymbolWorker& operator=(const SymbolWorker&) = delete;

  // A sample record arrived: snapshot its process's map unless one is
  // current, and name the Python code objects it holds that are new.
  void sampled(uint32_t pid, const void* data, size_t len);
  // pid exec'd: its next sample takes a new snapshot (a new program).
  void exec(uint32_t pid);
  // Ends the worker (what is queued is done first) and names every address
  // of the store's stacks. Returns the number of addresses named.
  size_t name_stacks(SampleStore& store);

 private:
  struct Task {
    uint32_t pid;
    uint64_t code;  // 0: snapshot the process; ~0: it exec'd, forget it; else a code object to name
  };
  void loop();
  void run(const Task& t);
  void hand_over(bool wait);  // pending_ to the worker's queue

  SysRoot root_;
  PythonHook on_python_;
  std::unique_ptr<symbols::Symbolizer> sym_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  // The drain thread's own (no lock): what it asked for, and what it has not handed over yet.
  std::set<uint32_t> current_;  // pids with a snapshot taken since their last exec (or queued)
  std::set<std::pair<uint32_t, uint64_t>> asked_;  // code objects queued or named
  std::vector<Task> pending_;
  // Worker-side: the CPython processes found and the code objects named.
  std::map<uint32_t, std::shared_ptr<const symbols::PythonProcess>> python_;
  std::map<std::pair<uint32_t, uint64_t>, std::string> python_names_;
  bool stop_ = false;
  std::thread thread_;
};

// The names as user notes ({"note":"symbols","names":[[pid, ip, name]...]}),
// each under the note size limit.
std::vector<nlohmann::json> symbol_notes(const SampleStore& store);

}  // namespace steptrace
