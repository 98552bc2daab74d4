// SPDX-License-Identifier: Apache-2.0
#include "daemon/http_server.h"

#include <fmt/core.h>
#include <httplib.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
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
    // Only two methods, small requests, no request bodies.
    // (Runs before the body is read: refuse any request that announces one.)
    const auto cl = req.get_header_value("Content-Length");
    if ((req.method != "GET" && req.method != "HEAD" && req.method != "POST") || (!cl.empty() && cl != "0") ||
        req.has_header("Transfer-Encoding") || req.target.size() > 256) {
      res.status = 400;
      res.set_content("bad request\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lk(mu_);
    res.set_content(metrics_text_, "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("steptrace daemon\nGET /metrics  Prometheus metrics\nPOST /dump    flight-recorder capture\n",
                    "text/plain");
  });
  svr.Post("/dump", [this](const httplib::Request&, httplib::Response& res) {
    auto req = std::make_shared<DumpRequest>();
    req->reason = "http";
    std::unique_lock<std::mutex> lk(mu_);
    dump_queue_.push_back(req);
    if (!cv_.wait_for(lk, std::chrono::seconds(30), [&] { return req->done; })) {
      res.status = 503;
      res.set_content("dump timed out\n", "text/plain");
      return;
    }
    res.status = req->http_status;
    res.set_content(req->message + "\n", "text/plain");
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

std::deque<std::shared_ptr<DumpRequest>> MetricsServer::take_dump_requests() {
  std::deque<std::shared_ptr<DumpRequest>> q;
  std::lock_guard<std::mutex> lk(mu_);
  q.swap(dump_queue_);
  return q;
}

void MetricsServer::answer(DumpRequest& req, int http_status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    req.http_status = http_status;
    req.message = message;
    req.done = true;
  }
  cv_.notify_all();
}

void MetricsServer::answer_all(int http_status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& r : dump_queue_) {
      r->http_status = http_status;
      r->message = message;
      r->done = true;
    }
    dump_queue_.clear();
  }
  cv_.notify_all();
}

}  // namespace steptrace::daemon
