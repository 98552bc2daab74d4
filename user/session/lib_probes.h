// SPDX-License-Identifier: Apache-2.0
// Runtime and step-marker libraries in traced processes: which processes
// still need their memory maps scanned, and the uprobes a found library
// gets. Shared by `run`/`attach` sessions and the daemon.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "steptrace_abi.h"

namespace steptrace {

class BpfTracer;

// A runtime or marker library in a process's /proc/PID/maps: the path as the
// process sees it (in its own mount namespace), the address range of one of
// its mappings, and the device and inode the kernel really maps.
struct MappedLib {
  std::string path;
  std::string range;  // "7f0000-7f1000": the /proc/PID/map_files entry
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  // One probe per file: the same library seen through two paths (two
  // containers, a bind mount, the host) is one inode.
  std::string key() const;
};

// Where steptrace can open a library `pid` maps. A container's paths mean
// nothing in steptrace's own mount namespace (the file is absent, or another
// one), so the path is resolved through /proc/PID/root and checked against
// the mapped inode; when that fails, /proc/PID/map_files/RANGE names the
// mapped file itself (it needs CAP_SYS_ADMIN). `error` says why neither works.
struct LibOpenPath {
  std::string path;   // empty when nothing reaches the file
  std::string error;  // why the first choice was not used, or why nothing works
};
LibOpenPath resolve_mapped_lib(const std::string& proc_root, uint32_t pid, const MappedLib& lib);
// The MappedLib::key() of a file by its path here (libraries probed up front); "" when it cannot be stat()ed.
std::string file_key(const std::string& path);

// Runtime and marker libraries in a /proc/PID/maps text (one entry per file).
std::vector<MappedLib> find_mapped_probe_libs(const std::string& maps);

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
  // When the next scan is due (CLOCK_MONOTONIC); UINT64_MAX when none waits.
  uint64_t next_due_ns() const;
  void clear() { pending_.clear(); }
  // Scans the processes that are due under proc_root; found(pid, lib) for
  // each runtime or marker library mapped. Gone processes are dropped.
  void scan(uint64_t now_ns, const std::string& proc_root,
            const std::function<void(uint32_t, const MappedLib&)>& found);

 private:
  struct State {
    uint64_t first_seen_ns, next_scan_ns, interval_ns;
  };
  size_t max_pending_;
  std::map<uint32_t, State> pending_;
};

// Processes whose first device call sent their maps to be scanned again: a
// runtime loaded with dlopen after the exec's scans gave up (a Python job
// imports for seconds) is found then. Once per process image; a process
// that execs or exits is forgotten, so the set holds live device users.
class DeviceCallRescans {
 public:
  explicit DeviceCallRescans(size_t max_pids = 4096) : max_pids_(max_pids) {}
  // Whether this device call is the process's first (its maps are due a scan).
  bool first_call(uint32_t pid) { return pids_.size() < max_pids_ && pids_.insert(pid).second; }
  void forget(uint32_t pid) { pids_.erase(pid); }  // exec (a new image) or exit
  size_t size() const { return pids_.size(); }

 private:
  size_t max_pids_;
  std::set<uint32_t> pids_;
};

// A task-exit record (ST_EV_TASK_EXIT) of the last thread of its process.
inline bool exit_ends_process(const void* data, size_t len) {
  st_task_exit e;
  if (len < sizeof(e)) return false;
  std::memcpy(&e, data, sizeof(e));
  return (e.flags & ST_EXIT_GROUP_DEAD) != 0;
}

}  // namespace steptrace
