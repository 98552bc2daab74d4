// SPDX-License-Identifier: Apache-2.0
// The daemon's control path: a unix stream socket (default
// /run/steptrace/control.sock; its directory 0700, the socket 0600, both the
// daemon's own) served on its own thread. The file modes keep other users
// out; on top of them every connection's SO_PEERCRED is checked and only
// uid 0 and the daemon's own uid are served: anyone else gets one refusal
// line and is counted. The HTTP port serves read-only GETs only.
//
// Protocol, one line each way, then the daemon closes the connection:
//   dump [REASON]     ok PATH           (REASON goes into the capture's metadata only)
//   reload            ok MESSAGE        (what SIGHUP does)
//   level NAME|auto   ok MESSAGE        (the degrade_level floor at run time)
//   anything else     error MESSAGE
// A request is at most kMaxLine bytes of printable ASCII; the client has
// kReadTimeoutMs to send it (a newline or end of stream ends it). The main
// loop answers the requests (it owns the flight recorder and the budget).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "util/result.h"

namespace steptrace::daemon {

inline constexpr const char* kDefaultControlSocket = "/run/steptrace/control.sock";

struct ControlRequest {
  std::string verb;  // dump, reload, level
  std::string arg;   // dump: the reason (may be empty); level: a level name or "auto"
  bool done = false;
  bool ok = false;
  std::string message;
};

// One request line (without its newline) -> a request, or the sentence of
// the "error" answer. Never throws, whatever the bytes.
Result<ControlRequest> parse_control_line(std::string_view line);
// "ok MESSAGE\n" / "error MESSAGE\n", the message cut to one printable line.
std::string format_control_answer(bool ok, std::string_view message);
// Whether a peer with this uid is served by a daemon running as `self_uid`.
inline bool control_peer_allowed(uid_t peer, uid_t self_uid) { return peer == 0 || peer == self_uid; }

class ControlServer {
 public:
  static constexpr size_t kMaxLine = 512;
  static constexpr int kReadTimeoutMs = 5000;
  static constexpr int kAnswerTimeoutS = 120;  // a dump of a full flight recorder

  ControlServer() = default;
  ~ControlServer();  // stops the thread, removes the socket
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Creates the directory (0700) when missing, binds the socket (0600) and
  // starts serving. An error when the directory is not ours alone, the path
  // is taken by something that is not a socket, or a live daemon serves it.
  Status start(const std::string& path);
  bool running() const { return listen_fd_ >= 0; }

  // The requests that arrived since the last call (main loop).
  std::deque<std::shared_ptr<ControlRequest>> take_requests();
  // Answers one request (wakes the connection waiting for it).
  void answer(ControlRequest& req, bool ok, std::string message);
  // Answers every request still queued (shutting down).
  void answer_all(bool ok, const std::string& message);

  uint64_t refused() const { return refused_.load(); }        // peers that are not root or us
  uint64_t bad_requests() const { return bad_.load(); }       // malformed, too long, too slow

 private:
  void serve();
  void drain_briefly(int fd);
  void handle(int fd);
  std::string wait_answer(const std::shared_ptr<ControlRequest>& req);

  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the destructor wakes the thread
  ino_t ino_ = 0;     // the socket file we created (removed only if still ours)
  uid_t self_uid_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<ControlRequest>> queue_;
  std::atomic<uint64_t> refused_{0}, bad_{0};
};

}  // namespace steptrace::daemon
