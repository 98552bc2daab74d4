// SPDX-License-Identifier: Apache-2.0
#include "daemon/control_socket.h"

#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "util/log.h"

namespace steptrace::daemon {

namespace {

bool printable(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

int64_t now_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Writes all of `s` within the read timeout; a peer that does not read is dropped.
void send_all(int fd, const std::string& s) {
  size_t off = 0;
  int64_t end = now_ms() + ControlServer::kReadTimeoutMs;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int64_t left = end - now_ms();
      struct pollfd p = {fd, POLLOUT, 0};
      if (left > 0 && ::poll(&p, 1, static_cast<int>(left)) > 0) continue;
    }
    return;
  }
}

// The directory must be ours alone: created 0700 when missing; an existing
// one (systemd's RuntimeDirectory=) must be owned by us and writable by no one else.
Status prepare_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) {
    std::filesystem::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return make_error(fmt::format("cannot create {}: {}", dir.string(), std::strerror(errno)));
  }
  auto real = std::filesystem::canonical(dir, ec);
  if (ec) return make_error(fmt::format("control socket directory {}: {}", dir.string(), ec.message()));
  struct stat st {};
  if (::lstat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(fmt::format("control socket directory {} is not a directory", dir.string()));
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
    return make_error(fmt::format("control socket directory {} must be owned by us and writable by nobody else "
                                  "(a directory of its own, e.g. /run/steptrace)",
                                  dir.string()));
  return Ok{};
}

// A socket left by a daemon that died is removed; a live one is not ours to take.
Status clear_stale(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Ok{};
  if (!S_ISSOCK(st.st_mode)) return make_error(fmt::format("{} exists and is not a socket", path));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(fmt::format("socket: {}", std::strerror(errno)));
  struct sockaddr_un a {};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  ::close(fd);
  if (rc == 0) return make_error(fmt::format("another daemon serves the control socket {}", path));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return make_error(fmt::format("cannot remove the stale socket {}: {}", path, std::strerror(errno)));
  return Ok{};
}

}  // namespace

Result<ControlRequest> parse_control_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > ControlServer::kMaxLine) return make_error("request too long");
  if (!printable(line)) return make_error("bad request: printable ASCII only");
  line = trim(line);
  auto sp = line.find(' ');
  ControlRequest r;
  r.verb = std::string(line.substr(0, sp));
  r.arg = sp == std::string_view::npos ? "" : std::string(trim(line.substr(sp + 1)));
  if (r.verb == "dump") {
    if (r.arg.size() > 128) return make_error("dump: the reason is at most 128 characters");
    return r;
  }
  if (r.verb == "reload") {
    if (!r.arg.empty()) return make_error("reload takes no argument");
    return r;
  }
  if (r.verb == "level") {
    if (r.arg.empty() || r.arg.find(' ') != std::string::npos) return make_error("usage: level NAME|auto");
    return r;
  }
  if (r.verb.empty()) return make_error("empty request (dump [REASON], reload, level NAME|auto)");
  return make_error(fmt::format("unknown request '{}' (dump [REASON], reload, level NAME|auto)",
                                r.verb.substr(0, 32)));
}

std::string format_control_answer(bool ok, std::string_view message) {
  std::string m(message.substr(0, 1024));
  for (auto& c : m)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = ' ';
  return std::string(ok ? "ok" : "error") + (m.empty() ? "" : " ") + m + "\n";
}

ControlServer::~ControlServer() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == ino_) ::unlink(path_.c_str());
    ::close(listen_fd_);
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status ControlServer::start(const std::string& path) {
  struct sockaddr_un a {};
  if (path.empty() || path.front() != '/' || path.size() >= sizeof(a.sun_path))
    return make_error(fmt::format("control socket '{}': an absolute path under {} bytes", path, sizeof(a.sun_path)));
  path_ = path;
  self_uid_ = ::geteuid();
  if (auto s = prepare_dir(std::filesystem::path(path).parent_path()); !s) return s;
  if (auto s = clear_stale(path); !s) return s;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error(fmt::format("socket: {}", std::strerror(errno)));
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  // The socket file is created 0600 (umask at bind); nothing else creates
  // files while start-up runs on the main thread.
  mode_t old = ::umask(0177);
  int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  int e = errno;
  ::umask(old);
  if (rc != 0) {
    ::close(fd);
    return make_error(fmt::format("cannot bind the control socket {}: {}", path, std::strerror(e)));
  }
  struct stat st {};
  if (::chmod(path.c_str(), 0600) != 0 || ::lstat(path.c_str(), &st) != 0 || ::listen(fd, 16) != 0) {
    e = errno;
    ::unlink(path.c_str());
    ::close(fd);
    return make_error(fmt::format("control socket {}: {}", path, std::strerror(e)));
  }
  ino_ = st.st_ino;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    e = errno;
    ::unlink(path.c_str());
    ::close(fd);
    return make_error(fmt::format("eventfd: {}", std::strerror(e)));
  }
  listen_fd_ = fd;
  thread_ = std::thread([this] {
    // Signals go to the main thread.
    sigset_t set;
    sigfillset(&set);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    serve();
  });
  return Ok{};
}

void ControlServer::serve() {
  for (;;) {
    struct pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log::error("control socket: poll: {}", std::strerror(errno));
      return;
    }
    if (p[1].revents) return;
    int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) continue;  // EAGAIN, a peer that went away, EMFILE: poll again
    handle(c);
    ::close(c);
  }
}

// At most 512 bytes or 250 ms of a refused peer's input, thrown away.
void ControlServer::drain_briefly(int fd) {
  const int64_t end = now_ms() + 250;
  char buf[128];
  size_t got = 0;
  while (got < 512) {
    int64_t left = end - now_ms();
    struct pollfd p = {fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    got += static_cast<size_t>(n);
    if (std::memchr(buf, '\n', static_cast<size_t>(n))) return;
  }
}

// One connection at a time: the peer check comes before anything is read, so
// only root or the daemon's own uid can hold the socket (at most the read
// timeout, or until the main loop answers).
void ControlServer::handle(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || !control_peer_allowed(cred.uid, self_uid_)) {
    uint64_t n = ++refused_;
    if (n <= 10 || n % 1000 == 0)
      log::warn("control socket: refused a connection from uid {} pid {} ({} refused so far)", cred.uid, cred.pid, n);
    send_all(fd, format_control_answer(false, "permission denied: only root and the daemon's user may use it"));
    // Let the refused client's request line arrive before the close (it is
    // never read as a request): a client that writes right after connecting
    // would otherwise get EPIPE, or die of SIGPIPE, before it reads the answer.
    ::shutdown(fd, SHUT_WR);
    drain_briefly(fd);
    return;
  }
  std::string line;
  bool complete = false;
  int64_t end = now_ms() + kReadTimeoutMs;
  char buf[256];
  while (!complete && line.size() <= kMaxLine) {
    int64_t left = end - now_ms();
    struct pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (left <= 0 || ::poll(p, 2, static_cast<int>(left)) <= 0) break;
    if (p[1].revents) return;  // shutting down
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0 && line.empty()) return;  // connected and left (a probe): nothing to answer
    if (n <= 0) {
      complete = n == 0;  // end of stream ends the line
      break;
    }
    line.append(buf, static_cast<size_t>(n));
    if (auto nl = line.find('\n'); nl != std::string::npos) {
      line.resize(nl);
      complete = true;
    }
  }
  if (!complete) {
    ++bad_;
    send_all(fd, format_control_answer(false, line.size() > kMaxLine ? "request too long"
                                                                     : "no request line within the timeout"));
    return;
  }
  auto req = parse_control_line(line);
  if (!req) {
    ++bad_;
    send_all(fd, format_control_answer(false, req.error().message));
    return;
  }
  auto shared = std::make_shared<ControlRequest>(std::move(*req));
  send_all(fd, wait_answer(shared));
}

std::string ControlServer::wait_answer(const std::shared_ptr<ControlRequest>& req) {
  std::unique_lock<std::mutex> lk(mu_);
  if (stopping_) return format_control_answer(false, "shutting down");
  queue_.push_back(req);
  if (!cv_.wait_for(lk, std::chrono::seconds(kAnswerTimeoutS), [&] { return req->done || stopping_; }))
    return format_control_answer(false, "timed out waiting for the daemon");
  if (!req->done) return format_control_answer(false, "shutting down");
  return format_control_answer(req->ok, req->message);
}

std::deque<std::shared_ptr<ControlRequest>> ControlServer::take_requests() {
  std::deque<std::shared_ptr<ControlRequest>> q;
  std::lock_guard<std::mutex> lk(mu_);
  q.swap(queue_);
  return q;
}

void ControlServer::answer(ControlRequest& req, bool ok, std::string message) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    req.ok = ok;
    req.message = std::move(message);
    req.done = true;
  }
  cv_.notify_all();
}

void ControlServer::answer_all(bool ok, const std::string& message) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& r : queue_) {
      r->ok = ok;
      r->message = message;
      r->done = true;
    }
    queue_.clear();
  }
  cv_.notify_all();
}

}  // namespace steptrace::daemon
