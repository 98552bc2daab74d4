// SPDX-License-Identifier: Apache-2.0
#include "daemon/daemon_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace steptrace::test {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string make_tmpdir(const std::string& tag) {
  std::string t = "/tmp/steptrace-" + tag + "-XXXXXX";
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back(0);
  if (!::mkdtemp(buf.data())) return "";
  return buf.data();
}

Proc::Proc(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int nul = ::open("/dev/null", O_RDONLY);
    if (nul >= 0) ::dup2(nul, 0);
    ::setpgid(0, 0);
    std::vector<char*> av;
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    ::execv(av[0], av.data());
    std::fprintf(stderr, "exec %s: %s\n", av[0], std::strerror(errno));
    ::_exit(127);
  }
}

Proc::~Proc() {
  if (pid_ > 0 && status_ < 0) stop(5);
}

Proc::Proc(Proc&& o) noexcept : pid_(o.pid_), status_(o.status_) { o.pid_ = -1; }
Proc& Proc::operator=(Proc&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0 && status_ < 0) stop(5);
    pid_ = o.pid_;
    status_ = o.status_;
    o.pid_ = -1;
  }
  return *this;
}

bool Proc::running() {
  if (pid_ <= 0 || status_ >= 0) return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

int Proc::wait(double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (running()) {
    if (std::chrono::steady_clock::now() > end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

int Proc::stop(double timeout_s) {
  if (pid_ <= 0) return -1;
  if (!running()) return status_;
  ::kill(pid_, SIGTERM);
  if (wait(timeout_s) >= 0) return status_;
  ::kill(pid_, SIGKILL);
  return wait(10);
}

static HttpResult do_req(int port, const std::string& method, const std::string& path, const std::string& body,
                         double timeout_s) {
  httplib::Client c("127.0.0.1", port);
  auto secs = static_cast<time_t>(timeout_s);
  c.set_connection_timeout(secs, 0);
  c.set_read_timeout(secs, 0);
  httplib::Result r = method == "GET" ? c.Get(path.c_str())
                                      : c.Post(path.c_str(), body, "application/octet-stream");
  if (!r) return {};
  return {r->status, r->body};
}

HttpResult http_get(int port, const std::string& path, double timeout_s) { return do_req(port, "GET", path, "", timeout_s); }
HttpResult http_post(int port, const std::string& path, const std::string& body, double timeout_s) {
  return do_req(port, "POST", path, body, timeout_s);
}

std::optional<double> metric_value(const std::string& text, const std::string& name,
                                   const std::vector<std::string>& needles) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    char next = line.size() > name.size() ? line[name.size()] : 0;
    if (next != '{' && next != ' ') continue;
    bool ok = true;
    for (const auto& n : needles)
      if (line.find(n) == std::string::npos) ok = false;
    if (!ok) continue;
    auto sp = line.rfind(' ');
    try {
      return std::stod(line.substr(sp + 1));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<std::string> exposition_problems(const std::string& text) {
  std::vector<std::string> out;
  std::set<std::string> families;
  std::string family, type;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      t >> family >> type;
      if (!families.insert(family).second) out.push_back("second # TYPE for " + family);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    bool in_family = name == family;
    if (type == "histogram" || type == "summary")
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (name == family + suffix) in_family = true;
    if (!in_family) out.push_back("sample of " + name + " inside family " + family + ": " + line);
    // Label names: after '{' or ',' up to '='; values are skipped with their escapes.
    size_t i = line.find('{');
    if (i == std::string::npos || i > line.find(' ')) continue;
    while (i < line.size() && line[i] != '}') {
      size_t eq = line.find('=', i + 1);
      if (eq == std::string::npos) break;
      std::string label = line.substr(i + 1, eq - i - 1);
      if (label == "job" || (label == "pid" && name != "steptrace_rank_info"))
        out.push_back("label " + label + " on " + name);
      size_t j = eq + 2;  // past ="
      while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
      i = j + 1;  // ',' or '}'
    }
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double proc_cpu_s(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto r = s.rfind(')');
  if (r == std::string::npos) return 0;
  std::istringstream in(s.substr(r + 2));
  std::string f;
  unsigned long long ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> f; ++i) {
    if (i == 14) ut = std::stoull(f);
    if (i == 15) st = std::stoull(f);
  }
  return static_cast<double>(ut + st) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

uint64_t proc_rss(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/statm");
  unsigned long size = 0, res = 0;
  if (std::sscanf(s.c_str(), "%lu %lu", &size, &res) != 2) return 0;
  return static_cast<uint64_t>(res) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace steptrace::test
