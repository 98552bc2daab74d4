// SPDX-License-Identifier: Apache-2.0
// Discovery: which processes on the host use an accelerator? Every scan
// walks /proc/*/fd and reads the fd links (readlink only: stat()ing a file on
// a hung FUSE mount could block the daemon). A process holds an accelerator
// when a link names a configured --accel-dev path, or a /dev/neuron* node.
// Tracing in the kernel follows the processes' children from then on.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace::daemon {

struct ProcIdentity {
  std::string job;   // STEPTRACE_JOB / TORCHELASTIC_RUN_ID / SLURM_JOB_ID, else the cgroup's last component
  std::string rank;  // RANK from the environment ("" when absent)
  std::string node;  // GROUP_RANK / NODE_RANK / SLURM_NODEID from the environment ("" when absent)
  std::string comm;  // /proc/PID/comm when first seen (labels steptrace_rank_info and the per-process series)
  // Kubernetes pod and container (util/proc_identity.h): labels of steptrace_rank_info; "" outside one.
  std::string pod, pod_namespace, container;  // container: the runtime's id, first 12 digits
};

class ProcScanner {
 public:
  explicit ProcScanner(std::string proc = "/proc") : proc_(std::move(proc)) {}
  void set_accel_paths(std::vector<std::string> paths) { paths_ = std::move(paths); }
  // Only processes in this cgroup or below ("" = all).
  void set_cgroup_scope(std::string cgroup) { cgroup_ = std::move(cgroup); }

  // Pids (tgids) that hold an accelerator fd now, skipping `self` and the pids in `skip`.
  std::vector<uint32_t> holders(uint32_t self, const std::set<uint32_t>& skip) const;
  // Every live descendant of `pid` (children of children...), with its parent.
  std::vector<std::pair<uint32_t, uint32_t>> descendants(uint32_t pid) const;
  bool alive(uint32_t pid) const;
  ProcIdentity identity(uint32_t pid) const;

 private:
  bool link_matches(std::string_view link) const;
  std::string proc_;
  std::vector<std::string> paths_;
  std::string cgroup_;
};

// Pure helpers (unit-tested).
bool accel_link_matches(std::string_view link, const std::vector<std::string>& paths);
ProcIdentity parse_identity(std::string_view environ, std::string_view cgroup);
// A /proc/PID/cgroup text has a line whose path is `scope` or below it.
bool cgroup_in_scope(std::string_view proc_cgroup, std::string_view scope);
// The scope as /proc/PID/cgroup paths read: a cgroup directory under a
// cgroup mount (/proc/mounts text; "/sys/fs/cgroup/unified/a/b" -> "/a/b")
// loses its mount point, any other path is taken as it is.
std::string cgroup_scope_path(std::string_view configured, std::string_view proc_mounts);
std::optional<uint32_t> parse_stat_ppid(std::string_view stat);

}  // namespace steptrace::daemon
