// SPDX-License-Identifier: Apache-2.0
#include "session/container_target.h"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "util/log.h"
#include "util/proc_identity.h"
#include "util/text.h"

namespace steptrace {
namespace {

// Where the cgroup v2 hierarchy is mounted ("" when it is not).
std::string cgroup2_mount(const SysRoot& root) {
  auto mi = read_small_file(root.proc() + "/self/mountinfo", 4 << 20);
  if (!mi) return "";
  std::istringstream in(*mi);
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
    std::string id, parent, devno, mroot, target, fstype;
    pre >> id >> parent >> devno >> mroot >> target;
    post >> fstype;
    if (fstype == "cgroup2") return target;
  }
  return "";
}

bool matches(const TargetSpec& t, const ProcIdentity& id) {
  const auto& c = id.container;
  if (!t.container.empty())
    return !c.container_id.empty() && c.container_id.compare(0, t.container.size(), t.container) == 0;
  if (c.pod_uid.empty()) return false;
  if (t.pod == c.pod_uid || t.pod == id.pod_name) return true;
  return !id.pod_namespace.empty() && t.pod == id.pod_namespace + "/" + id.pod_name;
}

}  // namespace

Result<TargetSpec> resolve_container_target(const TargetSpec& t, const SysRoot& root) {
  const bool by_container = !t.container.empty();  // its form was checked with the options
  std::vector<uint32_t> pids;
  ContainerRef where;
  std::set<std::string> seen;  // what is on this node, for the error
  for (const auto& [pid, st] : root.processes()) {
    auto id = read_proc_identity(root.proc(), pid);
    if (!id.container.in_container()) continue;
    if (seen.size() < 8)
      seen.insert(by_container ? id.container.container_id.substr(0, 12)
                               : (id.pod_namespace.empty() ? "" : id.pod_namespace + "/") +
                                     (id.pod_name.empty() ? id.container.pod_uid : id.pod_name));
    if (!matches(t, id)) continue;
    pids.push_back(pid);
    if (where.cgroup.empty() || (id.container.unified && !where.unified)) where = id.container;
  }
  const std::string what = by_container ? "container " + t.container : "pod " + t.pod;
  if (pids.empty())
    return make_error(fmt::format("{}: no process on this node is in it ({} seen: {})", host_string(what),
                                  by_container ? "containers" : "pods",
                                  seen.empty() ? "none" : fmt::format("{}", fmt::join(seen, ", "))));
  TargetSpec out;
  const std::string mount = where.unified ? cgroup2_mount(root) : "";
  if (!mount.empty()) {
    const std::string dir = mount + (by_container ? where.cgroup : where.pod_cgroup);
    struct stat sb {};
    if (::stat(dir.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) {
      log::info("{}: cgroup {} ({} process(es) now)", host_string(what), dir, pids.size());
      out.cgroup_path = dir;
      return out;
    }
  }
  // No cgroup v2 directory for it: the processes there now, and their children.
  log::warn("{}: its cgroup is not on a cgroup v2 hierarchy here; tracing its {} process(es) and their children "
            "(processes it starts later by other means are not followed)",
            host_string(what), pids.size());
  out.pids = pids;
  return out;
}

}  // namespace steptrace
