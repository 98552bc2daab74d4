// SPDX-License-Identifier: Apache-2.0
// The daemon's HTTP endpoint (cpp-httplib, its own thread): GET /metrics
// serves the text the main loop last rendered; POST /dump queues a request
// that the main loop answers (it owns the flight recorder), waiting at most
// 30 s. Small requests only: no bodies, two methods, short targets.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "util/result.h"

namespace httplib {
class Server;
}

namespace steptrace::daemon {

struct DumpRequest {
  std::string reason;
  bool done = false;
  int http_status = 0;
  std::string message;
};

class MetricsServer {
 public:
  MetricsServer();
  ~MetricsServer();  // stops the server thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds host:port and starts serving; an error when the port cannot be bound.
  Status start(const std::string& host, int port, const std::string& listen_text);
  void set_metrics(std::string text);
  // The dump requests that arrived since the last call.
  std::deque<std::shared_ptr<DumpRequest>> take_dump_requests();
  // Answers one request (wakes its HTTP handler).
  void answer(DumpRequest& req, int http_status, const std::string& message);
  // Answers every request still queued (shutting down).
  void answer_all(int http_status, const std::string& message);

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string metrics_text_;
  std::deque<std::shared_ptr<DumpRequest>> dump_queue_;
};

}  // namespace steptrace::daemon
