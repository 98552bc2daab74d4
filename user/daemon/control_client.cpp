// SPDX-License-Identifier: Apache-2.0
#include "daemon/control_client.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "daemon/control_socket.h"

namespace steptrace::daemon {

namespace {

double mono_s() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string connect_hint(int e, const std::string& path) {
  switch (e) {
    case ENOENT: return fmt::format("no control socket at {} (is the daemon running, with control_socket on?)", path);
    case EACCES:
    case EPERM: return fmt::format("permission denied on {} (the control socket is for root)", path);
    case ECONNREFUSED: return fmt::format("nothing listens on {} (the daemon is not running)", path);
    default: return fmt::format("cannot connect to {}: {}", path, std::strerror(e));
  }
}

}  // namespace

Result<std::string> control_request(const std::string& path, const std::string& line, double timeout_s) {
  struct sockaddr_un a {};
  if (path.empty() || path.size() >= sizeof(a.sun_path)) return make_error(fmt::format("bad socket path '{}'", path));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(fmt::format("socket: {}", std::strerror(errno)));
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(connect_hint(e, path));
  }
  std::string req = line + "\n";
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The daemon may have answered (a refusal) and closed before reading.
      break;
    }
    off += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  const double end = mono_s() + timeout_s;
  char buf[512];
  while (answer.find('\n') == std::string::npos && answer.size() < 4096) {
    double left = end - mono_s();
    struct pollfd p = {fd, POLLIN, 0};
    if (left <= 0) break;
    int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto nl = answer.find('\n');
  if (nl == std::string::npos) {
    if (answer.empty()) return make_error(fmt::format("no answer from the daemon within {:g} s", timeout_s));
    return make_error("the daemon's answer was cut short");
  }
  answer.resize(nl);
  return answer;
}

int ctl_main(int argc, char** argv) {
  CLI::App app{"steptrace ctl: ask the running daemon (its control socket; root or the daemon's user)"};
  app.name("steptrace ctl");
  std::string socket = kDefaultControlSocket;
  double timeout_s = ControlServer::kAnswerTimeoutS + 10;
  std::vector<std::string> words;
  app.add_option("--socket", socket, "Control socket of the daemon (its control_socket)")->capture_default_str();
  app.add_option("--timeout", timeout_s, "Seconds to wait for the answer")->capture_default_str();
  app.add_option("request", words,
                 "dump [REASON]: write a flight-recorder capture now, prints its path\n"
                 "reload: re-read the configuration (as SIGHUP)\n"
                 "level NAME|auto: the degradation floor (as degrade_level) until the next reload; auto = the "
                 "configured one")
      ->required();
  app.footer("Exit status: 0 ok, 1 the daemon said error or cannot be reached, 2 bad usage.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    int code = app.exit(e, out, err);
    if (code == 0) {
      fmt::print("{}", out.str());
      return 0;
    }
    fmt::print(stderr, "{}", err.str().empty() ? std::string(e.what()) + "\n" : err.str());
    return 2;
  }
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + w;
  // The daemon checks again; refusing here gives a usage error (2) and a clear message.
  auto req = parse_control_line(line);
  if (!req) {
    fmt::print(stderr, "steptrace ctl: {}\n", req.error().message);
    return 2;
  }
  if (!(timeout_s > 0)) {
    fmt::print(stderr, "steptrace ctl: --timeout must be positive\n");
    return 2;
  }
  auto answer = control_request(socket, line, timeout_s);
  if (!answer) {
    fmt::print(stderr, "steptrace ctl: {}\n", answer.error().message);
    return 1;
  }
  if (answer->rfind("ok", 0) == 0 && (answer->size() == 2 || (*answer)[2] == ' ')) {
    fmt::print("{}\n", answer->size() > 3 ? answer->substr(3) : "ok");
    return 0;
  }
  std::string msg = answer->rfind("error ", 0) == 0 ? answer->substr(6) : *answer;
  fmt::print(stderr, "steptrace ctl: {}\n", msg);
  return 1;
}

}  // namespace steptrace::daemon
