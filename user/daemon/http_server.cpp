// SPDX-License-Identifier: Apache-2.0
#include "daemon/http_server.h"

#include <fmt/core.h>
#include <httplib.h>
#include <signal.h>

#include <cerrno>
#include <cstring>

namespace steptrace::daemon {

MetricsServer::MetricsServer() = default;

MetricsServer::~MetricsServer() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

Status MetricsServer::start(const std::string& host, int port, const std::string& listen_text) {
  http_ = std::make_unique<httplib::Server>();
  auto& svr = *http_;
  svr.new_task_queue = [] { return new httplib::ThreadPool(2); };
  svr.set_payload_max_length(1024);
  svr.set_read_timeout(5, 0);
  svr.set_write_timeout(5, 0);
  svr.set_keep_alive_max_count(20);
  svr.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    // Read-only: GET and HEAD, small requests, no request bodies.
    // (Runs before the body is read: refuse any request that announces one.)
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.set_header("Allow", "GET, HEAD");
      res.set_content("method not allowed: this endpoint is read-only (dumps: steptrace ctl dump, as root)\n",
                      "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    const auto cl = req.get_header_value("Content-Length");
    if ((!cl.empty() && cl != "0") || req.has_header("Transfer-Encoding") || req.target.size() > 256) {
      res.status = 400;
      res.set_content("bad request\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lk(mu_);
    // Nothing published yet: a scrape fails rather than reading an empty page as "up, no series".
    if (metrics_text_.empty()) {
      res.status = 503;
      res.set_content("metrics not ready\n", "text/plain");
      return;
    }
    res.set_content(metrics_text_ + extra_text_, "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("steptrace daemon\nGET /metrics  Prometheus metrics\n", "text/plain");
  });
  if (!svr.bind_to_port(host, port))
    return make_error(fmt::format("cannot listen on {}: {}", listen_text, std::strerror(errno)));
  thread_ = std::thread([this] {
    // Signals go to the main thread.
    sigset_t set;
    sigfillset(&set);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    http_->listen_after_bind();
  });
  return Ok{};
}

void MetricsServer::set_metrics(std::string text) {
  std::lock_guard<std::mutex> lk(mu_);
  metrics_text_ = std::move(text);
}

void MetricsServer::set_extra_metrics(std::string text) {
  std::lock_guard<std::mutex> lk(mu_);
  extra_text_ = std::move(text);
}

}  // namespace steptrace::daemon
