// SPDX-License-Identifier: Apache-2.0
// Can tracing work here? Privileges, BTF, tracefs, lockdown, kernel
// features: each a row with an actionable hint. `steptrace check` prints the
// table; run/attach refuse to start on any failing row.
#pragma once

#include <string>
#include <vector>

#include "loader/features.h"

namespace steptrace {

enum class CheckStatus { ok, warn, fail };

struct CheckRow {
  std::string name;
  CheckStatus status;
  std::string detail;
  std::string hint;  // what to do when not ok
};

// Effective capabilities from /proc/self/status (CapEff), parsed.
struct Capabilities {
  bool bpf = false, perfmon = false, sys_admin = false;
};
Capabilities read_capabilities(const std::string& proc_root = "/proc");
Capabilities parse_cap_eff(const std::string& status_text);

// "[none] integrity confidentiality" -> "none"
std::string parse_lockdown(const std::string& text);

std::vector<CheckRow> run_preflight(const KernelFeatures& f, const Capabilities& caps,
                                    const std::string& lockdown);
bool preflight_ok(const std::vector<CheckRow>& rows);
std::string format_preflight(const std::vector<CheckRow>& rows);

}  // namespace steptrace
