// SPDX-License-Identifier: Apache-2.0
// attach/record/top --pod and --container: which processes of this node are
// in that pod or container (util/proc_identity.h, from every process's
// cgroup and environment), and the cgroup v2 directory that holds them, so
// the kernel's cgroup filter follows everything the pod starts later. Where
// the container's cgroup is only on a v1 hierarchy, its processes are
// traced by pid (children followed).
#pragma once

#include "cli/options.h"
#include "util/result.h"
#include "util/sys_root.h"

namespace steptrace {

// The target with --pod/--container replaced by --cgroup DIR (or -p PIDS);
// an error naming what was looked at when nothing matches.
Result<TargetSpec> resolve_container_target(const TargetSpec& t, const SysRoot& root);

}  // namespace steptrace
