// SPDX-License-Identifier: Apache-2.0
#include "util/proc_identity.h"

#include <algorithm>
#include <charconv>

#include "util/sys_root.h"
#include "util/text.h"

namespace steptrace {

std::optional<int> ProcIdentity::launcher_int(std::initializer_list<std::string_view> keys) const {
  for (std::string_view k : keys) {
    auto it = env.find(std::string(k));
    if (it == env.end()) continue;
    int v = -1;
    const std::string& s = it->second;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size() && v >= 0) return v;
  }
  return std::nullopt;
}
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

bool is_hex_id(std::string_view s) {
  return s.size() >= 12 && s.size() <= 128 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// 8-4-4-4-12 hex digits, separated by '-' (or '_' in systemd slice names).
bool is_uid(std::string_view s, char sep) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = s[i];
    if (dash ? c != sep : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// "kubepods-burstable-pod<uid_>.slice" / "kubepods-pod<uid_>.slice" (systemd), "pod<uid>" (cgroupfs).
std::string pod_uid_of(std::string_view comp) {
  if (starts_with(comp, "kubepods") && ends_with(comp, ".slice")) {
    auto p = comp.rfind("-pod");
    if (p == std::string_view::npos) return "";
    auto uid = comp.substr(p + 4, comp.size() - 6 - (p + 4));
    if (!is_uid(uid, '_')) return "";
    std::string out(uid);
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
  }
  if (starts_with(comp, "pod") && is_uid(comp.substr(3), '-')) return std::string(comp.substr(3));
  return "";
}

// "<prefix><id>.scope" for the runtimes' systemd scopes; conmon's own scopes are not the container.
bool container_of_scope(std::string_view comp, ContainerRef& c) {
  struct Form {
    std::string_view prefix, runtime;
  };
  static constexpr Form kForms[] = {
      {"cri-containerd-", "containerd"}, {"crio-", "cri-o"}, {"docker-", "docker"}, {"libpod-", "podman"}};
  if (!ends_with(comp, ".scope")) return false;
  for (const auto& f : kForms) {
    if (!starts_with(comp, f.prefix)) continue;
    auto id = comp.substr(f.prefix.size(), comp.size() - f.prefix.size() - 6);
    if (!is_hex_id(id)) return false;  // crio-conmon-<id>, libpod-conmon-<id>: the monitor, not the job
    c.runtime = std::string(f.runtime);
    c.container_id = std::string(id);
    return true;
  }
  return false;
}

}  // namespace

ContainerRef container_of_cgroup_path(std::string_view path) {
  ContainerRef c;
  std::vector<std::string_view> comps;
  for (size_t pos = 0; pos < path.size();) {
    size_t e = path.find('/', pos);
    if (e == std::string_view::npos) e = path.size();
    if (e > pos) comps.push_back(path.substr(pos, e - pos));
    pos = e + 1;
  }
  for (size_t i = 0; i < comps.size(); ++i) {
    const auto comp = comps[i];
    if (auto uid = pod_uid_of(comp); !uid.empty()) {
      c.pod_uid = uid;
      c.pod_cgroup = std::string(path.substr(0, static_cast<size_t>(comp.data() + comp.size() - path.data())));
      continue;
    }
    if (container_of_scope(comp, c)) continue;
    // cgroupfs driver: the container's directory is its bare id, under a pod
    // or under /docker.
    if (is_hex_id(comp) && comp.size() == 64 && i > 0 && (!c.pod_uid.empty() || comps[i - 1] == "docker")) {
      c.container_id = std::string(comp);
      if (comps[i - 1] == "docker") c.runtime = "docker";
    }
  }
  if (c.in_container()) c.cgroup = host_string(utf8_prefix(path, 512));
  return c;
}

ContainerRef parse_cgroup_container(std::string_view text) {
  ContainerRef v1;
  for (size_t pos = 0; pos < text.size();) {
    size_t e = text.find('\n', pos);
    if (e == std::string_view::npos) e = text.size();
    auto line = text.substr(pos, e - pos);
    pos = e + 1;
    // "hierarchy-id:controllers:path"; the path may hold ':'.
    size_t a = line.find(':');
    size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    auto c = container_of_cgroup_path(line.substr(b + 1));
    if (!c.in_container()) continue;
    if (line.substr(0, b + 1) == "0::") {  // the unified hierarchy is what a cgroup id names
      c.unified = true;
      return c;
    }
    if (!v1.in_container()) v1 = std::move(c);
  }
  return v1;
}

const std::vector<std::string_view>& identity_env_keys() {
  static const std::vector<std::string_view> keys = {
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK",
      "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NODEID",
      "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "NEURON_RT_ROOT_COMM_ID", "NEURON_RT_VISIBLE_CORES",
      "STEPTRACE_JOB", "POD_NAME", "POD_NAMESPACE", "MY_POD_NAME", "MY_POD_NAMESPACE", "K8S_POD_NAME",
      "K8S_POD_NAMESPACE"};
  return keys;
}

ProcIdentity parse_proc_identity(std::string_view environ, std::string_view proc_cgroup) {
  ProcIdentity id;
  id.container = parse_cgroup_container(proc_cgroup);
  const auto& keys = identity_env_keys();
  std::string hostname;
  for (size_t pos = 0; pos < environ.size();) {
    size_t end = environ.find('\0', pos);
    if (end == std::string_view::npos) end = environ.size();
    auto kv = environ.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    auto k = kv.substr(0, eq);
    auto v = host_string(utf8_prefix(kv.substr(eq + 1), 256));
    if (k == "HOSTNAME") hostname = v;
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) id.env[std::string(k)] = v;
  }
  auto first = [&id](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names)
      if (auto it = id.env.find(n); it != id.env.end() && !it->second.empty()) return it->second;
    return "";
  };
  id.job = first({"STEPTRACE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"});
  id.pod_name = first({"POD_NAME", "MY_POD_NAME", "K8S_POD_NAME"});
  id.pod_namespace = first({"POD_NAMESPACE", "MY_POD_NAMESPACE", "K8S_POD_NAMESPACE"});
  // Kubernetes sets a pod's hostname to its name unless the spec says otherwise.
  if (id.pod_name.empty() && !id.container.pod_uid.empty()) id.pod_name = hostname;
  return id;
}

ProcIdentity read_proc_identity(const std::string& proc_root, uint32_t pid) {
  const std::string base = proc_root + "/" + std::to_string(pid);
  auto env = read_small_file(base + "/environ", 256 << 10);
  auto cg = read_small_file(base + "/cgroup", 64 << 10);
  ProcIdentity id = parse_proc_identity(env.value_or(""), cg.value_or(""));
  if (id.pod_namespace.empty() && !id.container.pod_uid.empty()) {
    // Mounted in every pod that keeps its service-account token.
    if (auto ns = read_small_file(base + "/root/var/run/secrets/kubernetes.io/serviceaccount/namespace", 256)) {
      std::string_view v = *ns;
      while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
      id.pod_namespace = host_string(utf8_prefix(v, 253));
    }
  }
  return id;
}

std::string ProcIdentity::describe() const {
  std::string out;
  if (!container.pod_uid.empty() || !pod_name.empty()) {
    out = "pod ";
    if (!pod_namespace.empty()) out += pod_namespace + "/";
    out += pod_name.empty() ? "?" : pod_name;
    if (!container.pod_uid.empty()) out += " (uid " + container.pod_uid + ")";
  }
  if (!container.container_id.empty()) {
    if (!out.empty()) out += ", ";
    out += "container ";
    if (!container.runtime.empty()) out += container.runtime + " ";
    out += container.container_id.substr(0, 12);
  }
  return out;
}

}  // namespace steptrace
