// SPDX-License-Identifier: Apache-2.0
// Who a traced process is, beyond its pid: the container and Kubernetes pod
// it runs in (from its cgroup path), the pod's name and namespace (from the
// downward API's environment variables, or the service-account namespace
// file inside its root), and the launcher's identity of the rank (RANK,
// WORLD_SIZE, TORCHELASTIC_RUN_ID...). Read once when the process becomes a
// target; carried in captures, reports and metric labels, so a restart does
// not change what a series or a report calls the rank.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace {

// What a cgroup path says about the container it belongs to. The forms
// recognised (cgroup v2 or v1, systemd or cgroupfs driver):
//   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//   /kubepods/besteffort/pod<uid>/<id>           (cgroupfs driver)
//   .../crio-<id>.scope   .../docker-<id>.scope   /docker/<id>   .../libpod-<id>.scope
struct ContainerRef {
  std::string cgroup;        // the path it was read from ("" when none)
  std::string runtime;       // "containerd", "cri-o", "docker", "podman", "" when not known
  std::string container_id;  // the runtime's id (64 hex digits for all four), "" when none
  std::string pod_uid;       // Kubernetes pod UID with dashes, "" when not in a pod
  std::string pod_cgroup;    // the cgroup path up to the pod's own directory ("" when not in a pod)
  bool unified = false;      // read from the cgroup v2 line ("0::"): the path is a v2 directory
  bool in_container() const { return !container_id.empty() || !pod_uid.empty(); }
};

struct ProcIdentity {
  ContainerRef container;
  std::string pod_name, pod_namespace;  // "" when the job does not say
  // STEPTRACE_JOB, TORCHELASTIC_RUN_ID or SLURM_JOB_ID, the first set ("" when none).
  std::string job;
  // The launcher's variables the process has, by name (RANK, WORLD_SIZE,
  // LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR,
  // MASTER_PORT, TORCHELASTIC_RUN_ID, SLURM_JOB_ID, SLURM_PROCID,
  // NEURON_RT_ROOT_COMM_ID, STEPTRACE_JOB, POD_NAME, POD_NAMESPACE...).
  std::map<std::string, std::string> env;
  bool empty() const { return !container.in_container() && pod_name.empty() && job.empty() && env.empty(); }
  // The first of `keys` the launcher set to a non-negative decimal number
  // (RANK, then SLURM_PROCID...), or nothing.
  std::optional<int> launcher_int(std::initializer_list<std::string_view> keys) const;
  // "pod ns/name (uid 0123abcd-...)", "container containerd 0123456789ab", or "".
  std::string describe() const;
};

// The container a /proc/PID/cgroup text names: the unified ("0::") line
// first, then any v1 line that names one.
ContainerRef parse_cgroup_container(std::string_view proc_cgroup);
// One cgroup path's container, or an empty ref.
ContainerRef container_of_cgroup_path(std::string_view path);
// The identity in a /proc/PID/environ text (NUL-separated) and cgroup text.
// Every value is made safe for every sink (util/text.h) and capped.
ProcIdentity parse_proc_identity(std::string_view environ, std::string_view proc_cgroup);

// Reads proc_root/PID/{environ,cgroup}, and the service-account namespace
// inside the process's root when the environment does not name one.
ProcIdentity read_proc_identity(const std::string& proc_root, uint32_t pid);

// The launcher variables that are kept (a fixed list: the environment can
// hold secrets, and only these are read).
const std::vector<std::string_view>& identity_env_keys();

}  // namespace steptrace
