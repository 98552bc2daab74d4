// SPDX-License-Identifier: Apache-2.0
#include "daemon/discovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <memory>

#include "util/proc_identity.h"
#include "util/sys_root.h"
#include "util/text.h"

namespace steptrace::daemon {

namespace {

std::optional<uint32_t> to_pid(std::string_view s) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v == 0) return std::nullopt;
  return v;
}

template <typename Fn>
void for_each_pid(const std::string& proc, Fn&& fn) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(proc.c_str()), ::closedir);
  if (!d) return;
  while (auto* e = ::readdir(d.get())) {
    if (auto pid = to_pid(e->d_name)) fn(*pid);
  }
}

}  // namespace

bool accel_link_matches(std::string_view link, const std::vector<std::string>& paths) {
  for (const auto& p : paths)
    if (link == p) return true;
  // Real Neuron devices: /dev/neuron0, /dev/neuron1, ...
  constexpr std::string_view kNeuron = "/dev/neuron";
  if (link.substr(0, kNeuron.size()) == kNeuron) {
    auto rest = link.substr(kNeuron.size());
    return !rest.empty() && rest.find_first_not_of("0123456789") == std::string_view::npos;
  }
  return false;
}

bool ProcScanner::link_matches(std::string_view link) const { return accel_link_matches(link, paths_); }

std::vector<uint32_t> ProcScanner::holders(uint32_t self, const std::set<uint32_t>& skip) const {
  std::vector<uint32_t> out;
  for_each_pid(proc_, [&](uint32_t pid) {
    if (pid == self || skip.count(pid)) return;
    if (!cgroup_.empty()) {
      auto cg = read_small_file(proc_ + "/" + std::to_string(pid) + "/cgroup", 64 << 10);
      if (!cg || !cgroup_in_scope(*cg, cgroup_)) return;
    }
    std::string fd_dir = proc_ + "/" + std::to_string(pid) + "/fd";
    int dfd = ::open(fd_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;  // gone, or a kernel thread we may not read
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dfd), ::closedir);
    if (!d) {
      ::close(dfd);
      return;
    }
    char buf[4096];
    while (auto* e = ::readdir(d.get())) {
      if (e->d_name[0] == '.') continue;
      ssize_t n = ::readlinkat(dfd, e->d_name, buf, sizeof(buf));
      if (n <= 0 || n >= static_cast<ssize_t>(sizeof(buf))) continue;
      if (link_matches(std::string_view(buf, static_cast<size_t>(n)))) {
        out.push_back(pid);
        break;
      }
    }
  });
  return out;
}

std::optional<uint32_t> parse_stat_ppid(std::string_view stat) {
  if (auto st = parse_proc_stat(stat)) return st->ppid;  // one /proc/PID/stat parser (util/sys_root.h)
  return std::nullopt;
}

std::vector<std::pair<uint32_t, uint32_t>> ProcScanner::descendants(uint32_t root) const {
  std::multimap<uint32_t, uint32_t> children;
  for_each_pid(proc_, [&](uint32_t pid) {
    if (auto s = read_small_file(proc_ + "/" + std::to_string(pid) + "/stat", 4096))
      if (auto pp = parse_stat_ppid(*s)) children.emplace(*pp, pid);
  });
  std::vector<std::pair<uint32_t, uint32_t>> out;
  std::vector<uint32_t> todo{root};
  while (!todo.empty() && out.size() < 65536) {
    uint32_t p = todo.back();
    todo.pop_back();
    auto [b, e] = children.equal_range(p);
    for (auto it = b; it != e; ++it) {
      out.emplace_back(it->second, p);
      todo.push_back(it->second);
    }
  }
  return out;
}

bool cgroup_in_scope(std::string_view proc_cgroup, std::string_view scope) {
  while (scope.size() > 1 && scope.back() == '/') scope.remove_suffix(1);
  size_t pos = 0;
  while (pos < proc_cgroup.size()) {
    size_t end = proc_cgroup.find('\n', pos);
    if (end == std::string_view::npos) end = proc_cgroup.size();
    const auto line = proc_cgroup.substr(pos, end - pos);
    pos = end + 1;
    // "hierarchy-id:controllers:path"; the path may itself hold ':'.
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const auto path = line.substr(b + 1);
    if (scope == "/" || path == scope || (path.size() > scope.size() && path.substr(0, scope.size()) == scope &&
                                          path[scope.size()] == '/'))
      return true;
  }
  return false;
}

std::string cgroup_scope_path(std::string_view configured, std::string_view proc_mounts) {
  std::string_view best;
  size_t pos = 0;
  while (pos < proc_mounts.size()) {
    size_t end = proc_mounts.find('\n', pos);
    if (end == std::string_view::npos) end = proc_mounts.size();
    const auto line = proc_mounts.substr(pos, end - pos);
    pos = end + 1;
    // "source mountpoint fstype options 0 0" (a mount point with a space is
    // escaped as \040: such a cgroup mount is not matched).
    const size_t a = line.find(' ');
    const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
    const size_t c = b == std::string_view::npos ? b : line.find(' ', b + 1);
    if (c == std::string_view::npos) continue;
    const auto mnt = line.substr(a + 1, b - a - 1), type = line.substr(b + 1, c - b - 1);
    if (type != "cgroup" && type != "cgroup2") continue;
    if (configured.substr(0, mnt.size()) != mnt) continue;
    if (configured.size() > mnt.size() && configured[mnt.size()] != '/') continue;
    if (mnt.size() > best.size()) best = mnt;
  }
  if (best.empty()) return std::string(configured);
  const auto rest = configured.substr(best.size());
  return rest.empty() ? "/" : std::string(rest);
}

bool ProcScanner::alive(uint32_t pid) const {
  return ::access((proc_ + "/" + std::to_string(pid)).c_str(), F_OK) == 0;
}

ProcIdentity parse_identity(std::string_view environ, std::string_view cgroup) {
  ProcIdentity id;
  std::string job_env[3], node_env[3];
  constexpr std::string_view kNodeKeys[3] = {"GROUP_RANK=", "NODE_RANK=", "SLURM_NODEID="};
  constexpr std::string_view kKeys[3] = {"STEPTRACE_JOB=", "TORCHELASTIC_RUN_ID=", "SLURM_JOB_ID="};
  size_t pos = 0;
  while (pos < environ.size()) {
    size_t end = environ.find('\0', pos);
    if (end == std::string_view::npos) end = environ.size();
    auto kv = environ.substr(pos, end - pos);
    for (int i = 0; i < 3; ++i)
      if (kv.substr(0, kKeys[i].size()) == kKeys[i]) job_env[i] = std::string(kv.substr(kKeys[i].size()));
    if (kv.substr(0, 5) == "RANK=") id.rank = std::string(kv.substr(5));
    for (int i = 0; i < 3; ++i)
      if (kv.substr(0, kNodeKeys[i].size()) == kNodeKeys[i]) node_env[i] = std::string(kv.substr(kNodeKeys[i].size()));
    pos = end + 1;
  }
  for (const auto& j : job_env)
    if (!j.empty()) {
      id.job = j;
      break;
    }
  for (const auto& n : node_env)
    if (!n.empty()) {
      id.node = n;
      break;
    }
  if (id.job.empty()) {
    // cgroup v2 line "0::/system.slice/foo.service"
    size_t p = cgroup.find("0::");
    if (p != std::string_view::npos) {
      auto path = cgroup.substr(p + 3);
      path = path.substr(0, path.find('\n'));
      while (!path.empty() && path.back() == '/') path.remove_suffix(1);
      auto base = path.substr(path.rfind('/') + 1);
      id.job = base.empty() ? "root" : std::string(base);
    } else {
      id.job = "unknown";
    }
  }
  // Label values must stay small.
  // From the job's environment: any bytes. Valid UTF-8 with no control
  // characters, capped without cutting a character (util/text.h).
  id.job = std::string(utf8_prefix(host_string(id.job), 128));
  id.rank = std::string(utf8_prefix(host_string(id.rank), 16));
  id.node = std::string(utf8_prefix(host_string(id.node), 16));
  return id;
}

ProcIdentity ProcScanner::identity(uint32_t pid) const {
  std::string base = proc_ + "/" + std::to_string(pid);
  auto env = read_small_file(base + "/environ", 256 << 10);
  auto cg = read_small_file(base + "/cgroup", 64 << 10);
  ProcIdentity id = parse_identity(env.value_or(""), cg.value_or(""));
  const auto who = read_proc_identity(proc_, pid);
  id.pod = std::string(utf8_prefix(who.pod_name, 128));
  id.pod_namespace = std::string(utf8_prefix(who.pod_namespace, 64));
  id.container = who.container.container_id.substr(0, 12);
  // No launcher variable names the job: in a pod, its name says more than the
  // container's cgroup directory (which changes with every restart).
  if (who.job.empty() && !id.pod.empty()) id.job = std::string(utf8_prefix(id.pod, 128));
  std::string comm = read_small_file(base + "/comm", 64).value_or("");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  // Any bytes the process chose (prctl PR_SET_NAME): as for the job.
  id.comm = std::string(utf8_prefix(host_string(comm), 32));
  return id;
}

}  // namespace steptrace::daemon
