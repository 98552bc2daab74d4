// SPDX-License-Identifier: Apache-2.0
// The daemon's HTTP endpoint (cpp-httplib, its own thread), read-only:
// GET /metrics serves the text the main loop last rendered, GET / a list.
// Every other method gets 405 (the control path - dumps, reload - is the
// root-only unix socket of control_socket.h, not reachable from the network).
// Small requests only: no bodies, short targets.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "util/result.h"

namespace httplib {
class Server;
}

namespace steptrace::daemon {

class MetricsServer {
 public:
  MetricsServer();
  ~MetricsServer();  // stops the server thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds host:port and starts serving; an error when the port cannot be bound.
  Status start(const std::string& host, int port, const std::string& listen_text);
  void set_metrics(std::string text);
  // More families, served after set_metrics' text (the control path's own).
  void set_extra_metrics(std::string text);

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::mutex mu_;
  std::string metrics_text_, extra_text_;
};

}  // namespace steptrace::daemon
