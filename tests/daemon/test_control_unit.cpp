// SPDX-License-Identifier: Apache-2.0
// The daemon's control path without BPF: the request-line parser, the
// control socket served by a stand-in main loop (malformed, long, binary and
// silent clients), `steptrace ctl` exit codes, capture retention per trigger.
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon/config.h"
#include "daemon/control_client.h"
#include "daemon/control_socket.h"
#include "daemon/daemon_harness.h"
#include "daemon/dump_worker.h"

using namespace steptrace;
using namespace steptrace::daemon;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Connects, sends `bytes` (optionally then half-closes), returns what the server answers.
std::string raw_exchange(const std::string& path, const std::string& bytes, bool half_close, double timeout_s = 10) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a {};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  if (!bytes.empty()) (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[256];
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// A stand-in for the daemon's main loop: answers dump with a fake path, the rest ok.
struct FakeLoop {
  ControlServer& srv;
  std::atomic<bool> stop{false};
  std::atomic<int> served{0};
  std::thread t;
  explicit FakeLoop(ControlServer& s) : srv(s) {
    t = std::thread([this] {
      while (!stop) {
        for (auto& r : srv.take_requests()) {
          ++served;
          srv.answer(*r, r->verb != "level" || r->arg == "auto", r->verb == "dump" ? "/x/" + r->arg + ".cap" : r->verb);
        }
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~FakeLoop() {
    stop = true;
    t.join();
  }
};

int run_ctl(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ctl_main(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("control: request lines are parsed strictly and never throw", "[daemon]") {
  auto d = parse_control_line("dump slow job 42");
  REQUIRE(d.ok());
  CHECK(d->verb == "dump");
  CHECK(d->arg == "slow job 42");
  CHECK(parse_control_line("dump").ok());
  CHECK(parse_control_line("reload\r").ok());
  CHECK_FALSE(parse_control_line("reload now").ok());
  REQUIRE(parse_control_line("level aggregated").ok());
  CHECK_FALSE(parse_control_line("level").ok());
  CHECK_FALSE(parse_control_line("level a b").ok());
  CHECK_FALSE(parse_control_line("").ok());
  CHECK_FALSE(parse_control_line("rm -rf /").ok());
  CHECK_FALSE(parse_control_line(std::string("dump \0\xff", 7)).ok());
  CHECK_FALSE(parse_control_line("dump " + std::string(200, 'x')).ok());  // reason cap
  CHECK_FALSE(parse_control_line(std::string(10000, 'd')).ok());
  CHECK(format_control_answer(true, "/a b") == "ok /a b\n");
  CHECK(format_control_answer(false, "two\nlines\x1b") == "error two lines \n");
  CHECK(control_peer_allowed(0, 1000));
  CHECK(control_peer_allowed(1000, 1000));
  CHECK_FALSE(control_peer_allowed(65534, 1000));
  CHECK_FALSE(control_peer_allowed(65534, 0));
}

TEST_CASE("control: config key and flag, \"none\" turns it off", "[daemon]") {
  DaemonConfig c;
  CHECK(c.control_socket == kDefaultControlSocket);
  CHECK(control_socket_enabled(c));
  REQUIRE(apply_config_toml("control_socket = \"none\"\n", "f.toml", c).ok());
  CHECK_FALSE(control_socket_enabled(c));
  CHECK(validate(c).ok());
  const char* argv[] = {"daemon", "--control-socket", "/tmp/x/ctl.sock"};
  int code = 0;
  REQUIRE(parse_daemon_flags(3, argv, c, &code).ok());
  CHECK(c.control_socket == "/tmp/x/ctl.sock");
  c.control_socket = "relative.sock";
  CHECK_FALSE(validate(c).ok());
  c.control_socket = "/" + std::string(120, 'a');
  CHECK_FALSE(validate(c).ok());
}

TEST_CASE("control socket: modes, answers, and clients that misbehave", "[daemon]") {
  auto dir = test::make_tmpdir("ctl");
  REQUIRE(!dir.empty());
  std::string sock = dir + "/run/control.sock";
  {
    ControlServer srv;
    REQUIRE(srv.start(sock).ok());
    struct stat st {};
    REQUIRE(::stat((dir + "/run").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    REQUIRE(::lstat(sock.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    // A second server on the same path: a live daemon is not displaced.
    ControlServer second;
    auto s2 = second.start(sock);
    REQUIRE_FALSE(s2.ok());
    CHECK(s2.error().message.find("another daemon") != std::string::npos);

    FakeLoop loop(srv);
    auto a = control_request(sock, "dump testing", 10);
    REQUIRE(a.ok());
    CHECK(*a == "ok /x/testing.cap");
    CHECK(raw_exchange(sock, "frobnicate\n", false).rfind("error unknown request", 0) == 0);
    CHECK(raw_exchange(sock, std::string(100000, 'A'), false).rfind("error request too long", 0) == 0);
    CHECK(raw_exchange(sock, std::string("dump \x01\x02\xff\n", 9), false).rfind("error bad request", 0) == 0);
    CHECK(raw_exchange(sock, "reload", true) == "ok reload\n");  // end of stream ends the line
    // A client that never sends: answered after the read timeout; the next is served.
    auto t0 = std::chrono::steady_clock::now();
    CHECK(raw_exchange(sock, "", false).rfind("error no request line", 0) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(ControlServer::kReadTimeoutMs + 3000));
    CHECK(control_request(sock, "level auto", 10).ok());
    CHECK(srv.bad_requests() == 4);
    CHECK(srv.refused() == 0);

    // `steptrace ctl`: 0 ok, 1 error answer or unreachable, 2 usage.
    CHECK(run_ctl({"ctl", "--socket", sock, "dump", "from", "ctl"}) == 0);
    CHECK(run_ctl({"ctl", "--socket", sock, "level", "bogus"}) == 1);
    CHECK(run_ctl({"ctl", "--socket", sock, "frobnicate"}) == 2);
    CHECK(run_ctl({"ctl", "--socket", sock}) == 2);
    CHECK(run_ctl({"ctl", "--socket", dir + "/nothing.sock", "reload"}) == 1);
    CHECK(loop.served >= 5);
  }
  // The server removed its socket; a stale one (a crashed daemon's) is replaced.
  CHECK(::access(sock.c_str(), F_OK) != 0);
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a {};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, sock.c_str(), sizeof(a.sun_path) - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    ::close(fd);  // bound, never listened: what a dead daemon leaves
    ControlServer srv;
    CHECK(srv.start(sock).ok());
  }
  // Not a socket: left alone. A directory others can write to: refused.
  std::ofstream(dir + "/run/file.sock") << "x";
  ControlServer srv;
  CHECK_FALSE(srv.start(dir + "/run/file.sock").ok());
  ::mkdir((dir + "/open").c_str(), 0777);
  ::chmod((dir + "/open").c_str(), 0777);
  CHECK_FALSE(srv.start(dir + "/open/control.sock").ok());
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("dumps: retention per trigger, so requested dumps never rotate away slow-step ones", "[daemon]") {
  CHECK(dump_trigger_of("steptrace-node-1-20260101T000000Z-slow_step.cap") == "slow_step");
  CHECK(dump_trigger_of("steptrace-node-1-20260101T000000Z-control-3.cap") == "control");
  CHECK(dump_trigger_of("steptrace-h-20260101T000000Z-signal.cap") == "signal");
  CHECK(dump_trigger_of("steptrace-h-20260101T000000Z-signal.cap.tmp") == "");
  CHECK(dump_trigger_of("notes.cap") == "");
  CHECK(dump_trigger_of("steptrace-h-nodate-signal.cap") == "");

  auto dir = test::make_tmpdir("prune");
  auto touch = [&](const std::string& name, int age_s) {
    std::string p = dir + "/" + name;
    std::ofstream(p) << "x";
    fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  };
  for (int i = 0; i < 3; ++i) touch("steptrace-h-20260101T00000" + std::to_string(i) + "Z-slow_step.cap", 1000 + i);
  for (int i = 0; i < 30; ++i) touch("steptrace-h-20260102T000000Z-control-" + std::to_string(i + 1) + ".cap", i);
  touch("steptrace-h-20260101T000000Z-slow_step.cap.tmp", 5000);
  touch("unrelated.txt", 5000);
  prune_dumps(dir, 16);
  size_t slow = 0, control = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto t = dump_trigger_of(e.path().filename().string());
    slow += t == "slow_step";
    control += t == "control";
  }
  CHECK(slow == 3);
  CHECK(control == 16);
  CHECK(fs::exists(dir + "/steptrace-h-20260102T000000Z-control-1.cap"));  // the newest kept
  CHECK_FALSE(fs::exists(dir + "/steptrace-h-20260102T000000Z-control-30.cap"));
  remove_stale_dump_temps(dir);
  CHECK_FALSE(fs::exists(dir + "/steptrace-h-20260101T000000Z-slow_step.cap.tmp"));
  CHECK(fs::exists(dir + "/unrelated.txt"));
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("dump worker: writes a snapshot off the caller's thread, one at a time", "[daemon]") {
  auto dir = test::make_tmpdir("worker");
  FlightRecorder fr(10'000'000'000ull, 8 * FlightRecorder::kBlockBytes);
  std::vector<uint8_t> rec(64, 7);
  for (int i = 0; i < 20000; ++i) fr.append(static_cast<uint64_t>(i), rec.data(), rec.size());
  DumpWorker w;
  DumpJob early;
  CHECK_FALSE(w.submit(std::move(early)));  // not started
  w.start();
  DumpJob job;
  job.trigger = "control";
  job.path = dir + "/steptrace-h-20260101T000000Z-control.cap";
  job.dump_dir = dir;
  job.snapshot = fr.snapshot();
  job.meta = {{"host", "h"}, {"abi_version", 1}};
  REQUIRE(w.submit(std::move(job)));
  CHECK(w.busy());
  DumpJob second;
  CHECK_FALSE(w.submit(std::move(second)));  // one at a time
  auto o = w.wait_outcome();
  REQUIRE(o);
  CHECK(o->error.empty());
  CHECK(o->records == fr.records());
  CHECK_FALSE(w.busy());
  CHECK(fs::exists(o->path));
  CHECK(w.cpu_seconds() >= 0);
  std::system(("rm -rf '" + dir + "'").c_str());
}
