// SPDX-License-Identifier: Apache-2.0
#include "pipeline/hang_report.h"

#include <fmt/core.h>

namespace steptrace {

std::vector<int> HangReport::missing() const {
  std::vector<int> out;
  for (const auto& r : ranks)
    if (!r.in_collective) out.push_back(r.rank);
  return out;
}

std::string HangReport::headline() const {
  const double stalled = static_cast<double>(detected_ns - since_ns) / 1e9;
  auto miss = missing();
  std::string who;
  for (int r : miss) who += fmt::format("{}{}", who.empty() ? "" : ", ", r);
  std::string head = fmt::format("HANG: no step ended for {:.1f} s (threshold {:.1f} s, step p99 {:.3f} s): ", stalled,
                                 threshold_s, step_p99_s);
  if (ranks.empty()) return head + "no rank is traced";
  if (miss.empty()) return head + "every rank is inside the collective: the collective itself is stuck (network, a peer "
                                  "on another host)";
  if (miss.size() == ranks.size()) return head + "no rank is inside the collective: the job stopped before it";
  const size_t waiting = ranks.size() - miss.size();
  return head + fmt::format("rank{} {} did not join the collective that {} other rank{} wait{} in",
                            miss.size() > 1 ? "s" : "", who, waiting, waiting > 1 ? "s" : "", waiting > 1 ? "" : "s");
}

std::vector<std::string> HangReport::lines() const {
  std::vector<std::string> out;
  for (const auto& r : ranks) {
    std::string s = fmt::format("rank {} (pid {}, tid {}): {}{}", r.rank, r.pid, r.tid,
                                r.in_collective ? "in the collective: " : "NOT in the collective: ", r.doing);
    s += fmt::format("; state {}", r.state);
    if (r.syscall >= 0) s += fmt::format(", syscall {} ({})", r.syscall_name, r.syscall);
    if (!r.fd_target.empty()) s += fmt::format(" on {}", r.fd_target);
    if (r.blocked_s > 0) s += fmt::format(", blocked {:.1f} s", r.blocked_s);
    if (!r.kernel_stack.empty()) {
      std::string st;
      for (size_t i = 0; i < r.kernel_stack.size() && i < 4; ++i) st += (i ? " <- " : "") + r.kernel_stack[i];
      s += "; kernel stack " + st;
    }
    if (r.last_waker_tid)
      s += fmt::format("; last woken by {} (tid {})", r.last_waker_comm.empty() ? "?" : r.last_waker_comm,
                       r.last_waker_tid);
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json hang_json(const HangReport& h) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : h.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"tid", r.tid},
                     {"in_collective", r.in_collective},
                     {"doing", r.doing},
                     {"state", std::string(1, r.state)},
                     {"syscall", r.syscall},
                     {"syscall_name", r.syscall_name},
                     {"fd_target", r.fd_target},
                     {"blocked_s", r.blocked_s},
                     {"kernel_stack", r.kernel_stack},
                     {"last_waker_tid", r.last_waker_tid},
                     {"last_waker_comm", r.last_waker_comm}});
  return {{"since_ns", h.since_ns},       {"detected_ns", h.detected_ns}, {"ended_ns", h.ended_ns},
          {"threshold_s", h.threshold_s}, {"step_p99_s", h.step_p99_s},   {"missing_ranks", h.missing()},
          {"headline", h.headline()},     {"ranks", ranks}};
}

}  // namespace steptrace
