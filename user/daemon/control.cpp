// SPDX-License-Identifier: Apache-2.0
// The control socket's requests, answered on the main loop (control_socket.h
// has the protocol): dump (rate-limited, written by the dump worker; the
// answer waits for it), reload (what SIGHUP does), level (the degrade_level
// floor at run time, until the next reload or restart).
#include "daemon/daemon_impl.h"

#include <fmt/core.h>

#include "util/log.h"

namespace steptrace::daemon {

std::string Daemon::set_level_floor(const std::string& arg, bool* ok) {
  int floor = arg == "auto" ? level_by_name(cfg_.degrade_level) : level_by_name(arg);
  if (floor < 0) {
    std::string names;
    for (const auto& l : kLevels) names += (names.empty() ? "" : ", ") + std::string(l.name);
    *ok = false;
    return fmt::format("unknown level '{}': expected auto or one of {}", arg, names);
  }
  *ok = true;
  log::info("control socket: degradation floor set to '{}'{}", kLevels[floor].name,
            arg == "auto" ? " (auto: the configured degrade_level)" : "");
  if (budget_.set_floor(floor)) {
    apply_level(budget_.level(), "control socket raised the floor");
    return fmt::format("level {} (floor {})", kLevels[budget_.level()].name, kLevels[floor].name);
  }
  // A lower floor only frees the ladder: the budget steps back up after its hold time.
  return fmt::format("level {} (floor {}{})", kLevels[budget_.level()].name, kLevels[floor].name,
                     budget_.level() > floor ? "; the budget steps up to it as it recovers" : "");
}

void Daemon::handle_control() {
  for (auto& req : control_.take_requests()) {
    bool ok = false;
    std::string msg;
    if (req->verb == "dump") {
      if (auto s = request_manual_dump("control", req->arg, req); s) {
        ++control_requests_["dump ok"];  // answered by finish_dump when the capture is written
        continue;
      } else {
        msg = s.error().message;
      }
    } else if (req->verb == "reload") {
      auto s = reload();
      ok = s.ok();
      msg = ok ? fmt::format("reloaded {}", cfg_.config_path) : s.error().message;
    } else if (req->verb == "level") {
      msg = set_level_floor(req->arg, &ok);
    } else {
      msg = "unknown request";
    }
    ++control_requests_[req->verb + (ok ? " ok" : " error")];
    control_.answer(*req, ok, msg);
  }
}

// Not yet called from render_metrics (metrics.cpp): see the branch's notes.
void Daemon::render_control_metrics(Exposition& x) const {
  x.family("steptrace_control_requests_total", "counter",
           "Control-socket requests by verb and result (result=ok: accepted; a dump's write can still fail, see "
           "steptrace_dump_failures_total)");
  for (const char* verb : {"dump", "reload", "level"})
    for (const char* result : {"ok", "error"}) {
      auto it = control_requests_.find(std::string(verb) + " " + result);
      x.sample("steptrace_control_requests_total", host_labels({{"verb", verb}, {"result", result}}),
               it == control_requests_.end() ? 0 : static_cast<double>(it->second));
    }
  x.family("steptrace_control_refused_total", "counter",
           "Control-socket connections refused: the peer (SO_PEERCRED) is neither root nor the daemon's user");
  x.sample("steptrace_control_refused_total", host_labels({}), static_cast<double>(control_.refused()));
  x.family("steptrace_control_bad_requests_total", "counter",
           "Control-socket requests refused as malformed, too long or not sent within the timeout");
  x.sample("steptrace_control_bad_requests_total", host_labels({}), static_cast<double>(control_.bad_requests()));
  x.family("steptrace_dump_cpu_seconds_total", "counter",
           "CPU of the dump worker (capture compression); in tracer_cpu_seconds_total, not in the CPU budget");
  x.sample("steptrace_dump_cpu_seconds_total", host_labels({}), dump_worker_.cpu_seconds());
}

}  // namespace steptrace::daemon
