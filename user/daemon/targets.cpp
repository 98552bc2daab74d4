// SPDX-License-Identifier: Apache-2.0
// Which processes the daemon traces: accelerator holders found by discovery,
// their descendants (replayed into each window as fork events), processes the
// target set refused, and the runtime libraries to probe in them.
#include "daemon/daemon_impl.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/log.h"
#include "util/sys_root.h"
#include "util/text.h"

namespace steptrace::daemon {

void Daemon::resolve_accel_devs(bool first_time) {
  if (!tracer_) return;
  if (auto s = dev_files_.resolve(*tracer_, first_time); !s) log::warn("{}", s.error().message);
}

void Daemon::track(uint32_t pid, bool log_it) {
  if (tracked_.count(pid)) return;
  if (tracked_.size() >= cfg_.max_processes) {
    if (cap_hits_["processes"]++ == 0) log::warn("tracking cap reached ({} processes); ignoring new ones", cfg_.max_processes);
    return;
  }
  ProcIdentity id = scanner_.identity(pid);
  tracked_[pid] = id;
  identity_cache_[pid] = id;
  ++discovered_total_;
  if (tracer_) {
    add_target(pid);
    // Children forked before it opened the device (DataLoader workers) are not followed yet.
    for (auto [c, parent] : scanner_.descendants(pid)) {
      add_target(c);
      note_new_process(c);
      note_parent(c, parent);
    }
    seed_parents();
    SysRoot root;
    for (uint32_t tid : root.threads_of(pid))
      if (auto c = root.thread_comm(pid, tid)) pipe_.analysis().threads.set_comm(pid, tid, *c);
  }
  note_new_process(pid);
  if (log_it) log::info("tracing pid {} (job {}{}{})", pid, id.job, id.rank.empty() ? "" : ", rank ", id.rank);
}

// Adds `pid` to the kernel's target set. A refusal (the set is full) is
// never ignored: counted once per process and cause, logged once per cause,
// exported, retried at every discovery scan while the process lives, and the
// windows it misses are marked INCOMPLETE (close_window).
bool Daemon::add_target(uint32_t pid) {
  if (!tracer_) return false;
  int err = 0;
  auto st = tracer_->add_target(pid, &err);
  if (st) {
    untraced_.erase(pid);
    return true;
  }
  const std::string cause = err == E2BIG ? "map_full" : "error";
  if (untraced_.count(pid)) return false;  // already counted
  if (untraced_.size() < 65536) untraced_.insert(pid);
  ++target_add_failed_total_;
  ++window_target_add_failed_;
  if (target_add_failures_[cause]++ == 0)
    log::warn("{} ({}): processes refused are not traced, are counted in steptrace_target_add_failures_total and "
              "mark their windows incomplete; retried while they live",
              st.error().message, cause);
  return false;
}

void Daemon::retry_untraced() {
  if (!tracer_) return;
  for (auto it = untraced_.begin(); it != untraced_.end();) {
    uint32_t pid = *it++;
    if (!scanner_.alive(pid)) untraced_.erase(pid);
    else if (add_target(pid)) log::info("pid {} added to the target set after an earlier refusal", pid);
  }
}

void Daemon::note_parent(uint32_t child, uint32_t parent) {
  if (parents_.size() >= 65536 && !parents_.count(child)) {
    ++cap_hits_["processes"];
    return;
  }
  parents_[child] = parent;
}

void Daemon::seed_parents() {
  if (!window_open_) return;
  SysRoot root;
  for (const auto& [child, parent] : parents_) {
    st_task_new e{};
    e.hdr.size = sizeof(e);
    e.hdr.kind = ST_EV_TASK_NEW;
    e.hdr.ts_ns = window_start_ns_;
    e.hdr.pid = e.hdr.tid = parent;
    e.child_pid = e.child_tid = child;
    if (auto c = root.thread_comm(child, child)) std::strncpy(e.comm, c->c_str(), sizeof(e.comm) - 1);
    Event ev{e};
    pipe_.analysis().on_event(ev);
  }
}

void Daemon::discover() {
  resolve_accel_devs(false);
  retry_untraced();
  for (auto it = parents_.begin(); it != parents_.end();) {
    if (!scanner_.alive(it->first)) it = parents_.erase(it);
    else ++it;
  }
  // Forget exited processes (the kernel side drops them from its target set at exit).
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (!scanner_.alive(it->first)) {
      log::info("pid {} exited", it->first);
      it = tracked_.erase(it);
    } else {
      ++it;
    }
  }
  std::set<uint32_t> skip;
  for (const auto& [pid, id] : tracked_) skip.insert(pid);
  for (uint32_t pid : scanner_.holders(static_cast<uint32_t>(::getpid()), skip)) track(pid, true);
  // Bound the identity cache: keep live pids and ranks still exported.
  std::set<uint32_t> keep;
  for (const auto& [k, s] : series_) keep.insert(s.pid_num);
  for (auto it = identity_cache_.begin(); it != identity_cache_.end();) {
    if (!tracked_.count(it->first) && !keep.count(it->first)) it = identity_cache_.erase(it);
    else ++it;
  }
}

void Daemon::note_new_process(uint32_t pid) {
  if (!(active_subsystems_ & ST_SUB_UPROBE)) return;
  device_call_rescans_.forget(pid);  // a new image may load a runtime of its own
  lib_scan_.add(pid, monotonic_ns());
}

// A runtime loaded by dlopen after the exec's scans gave up (a Python job
// imports for seconds): the process's first device call sends its maps to be
// scanned again.
void Daemon::note_device_call(uint32_t pid) {
  if ((active_subsystems_ & ST_SUB_UPROBE) && device_call_rescans_.first_call(pid)) lib_scan_.add(pid, monotonic_ns());
}

void Daemon::attach_lib(const std::string& path) {
  if (!tracer_ || !probed_libs_.insert(path).second) return;
  if (std::find(known_libs_.begin(), known_libs_.end(), path) == known_libs_.end() && known_libs_.size() < 64)
    known_libs_.push_back(path);
  std::vector<std::string> warnings;
  int attached = attach_lib_probes(*tracer_, path, &warnings);
  for (const auto& w : warnings) log::warn("{}", w);
  log::info("probing {} ({} functions)", path, attached);
}

// A library as a process maps it: reached through the process's own root
// (a container's paths are not ours), probed once per inode.
void Daemon::attach_mapped_lib(uint32_t pid, const MappedLib& lib) {
  if (!tracer_ || !probed_libs_.insert(lib.key()).second) return;
  auto where = resolve_mapped_lib("/proc", pid, lib);
  if (where.path.empty()) {
    log::warn("cannot reach {} as process {} maps it: {}", host_string(lib.path), pid, host_string(where.error));
    return;
  }
  attach_lib(where.path);
}

void Daemon::scan_for_libs() {
  lib_scan_.scan(monotonic_ns(), "/proc", [this](uint32_t pid, const MappedLib& lib) { attach_mapped_lib(pid, lib); });
}

void Daemon::on_raw_record(const st_event_header& h, const void* data, size_t len) {
  if (h.kind == ST_EV_TASK_EXEC) note_new_process(h.pid);
  if (h.kind == ST_EV_ACCEL_IOCTL) note_device_call(h.pid);
  if (h.kind == ST_EV_TASK_EXIT && exit_ends_process(data, len)) device_call_rescans_.forget(h.pid);
  if (h.kind == ST_EV_TASK_NEW && len >= sizeof(st_task_new)) {
    st_task_new tn;
    std::memcpy(&tn, data, sizeof(tn));
    if (!(tn.flags & ST_TASK_IS_THREAD)) note_parent(tn.child_pid, tn.hdr.pid);
  }
}

}  // namespace steptrace::daemon
