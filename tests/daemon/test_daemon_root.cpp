// SPDX-License-Identifier: Apache-2.0
// [root] tests of `steptrace daemon`, the real binary: a real Prometheus
// server scraping it while trainsim runs; a long run of short-lived jobs with
// flat RSS; an event storm that pushes it over its CPU budget.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "daemon/daemon_harness.h"

using namespace steptrace::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// `promtool check metrics` on an exposition: "" when it parses and its lint
// finds nothing (exit 0), else promtool's exit status and output. It exits 3
// for lint findings (missing HELP, names, units), 1 when it cannot parse.
std::string promtool_check_metrics(const std::string& text, const std::string& dir) {
  std::ofstream(dir + "/metrics.txt") << text;
  std::string cmd = std::string(PROMTOOL_BIN) + " check metrics < '" + dir + "/metrics.txt' > '" + dir +
                    "/promtool.log' 2>&1";
  int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 0) return "";
  return "promtool exit " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) + ": " +
         read_file(dir + "/promtool.log");
}

void require_root() {
  INFO("[root] tests load BPF programs: run them as root");
  REQUIRE(::geteuid() == 0);
}

struct DaemonRun {
  std::string dir, log, sock;
  int port = 0;
  Proc proc;
  DaemonRun(const std::string& tag, std::vector<std::string> extra) {
    dir = make_tmpdir(tag);
    REQUIRE(!dir.empty());
    log = dir + "/daemon.log";
    sock = dir + "/run/control.sock";  // not /run/steptrace: tests may run beside an installed daemon
    port = free_port();
    std::ofstream(dir + "/empty.toml") << "# test config\n";
    std::vector<std::string> argv = {STEPTRACE_BIN, "daemon", "--config", dir + "/empty.toml", "--listen",
                                     "127.0.0.1:" + std::to_string(port), "--dump-dir", dir + "/dumps",
                                     "--control-socket", sock};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc = Proc(argv, log);
    auto end = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < end) {
      if (http_get(port, "/metrics", 2).status == 200) return;
      if (!proc.running()) break;
      std::this_thread::sleep_for(100ms);
    }
    FAIL("daemon did not come up:\n" << read_file(log));
  }
  ~DaemonRun() {
    proc.stop(10);
    std::system(("rm -rf '" + dir + "'").c_str());
  }
  std::string metrics() { return http_get(port, "/metrics", 5).body; }
  double metric(const std::string& name, const std::vector<std::string>& needles = {}) {
    return metric_value(metrics(), name, needles).value_or(-1);
  }
};

// Polls `pred` every `every` until it holds or `limit` has passed.
template <typename Pred, typename Limit>
bool poll_until(Pred pred, Limit limit, std::chrono::milliseconds every = std::chrono::milliseconds(100)) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return false;
}

// Children that open `file` (so discovery picks them up), do a little work and exit.
pid_t short_job(const std::string& file, int ms) {
  pid_t p = ::fork();
  if (p == 0) {
    int fd = ::open(file.c_str(), O_RDONLY);
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    std::thread t([&] {
      while (std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(2ms);
    });
    int pipefd[2];
    if (::pipe(pipefd) != 0) ::_exit(1);
    char b = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (::write(pipefd[1], &b, 1) != 1 || ::read(pipefd[0], &b, 1) != 1) break;
      std::this_thread::sleep_for(1ms);
    }
    t.join();
    ::close(fd);
    ::_exit(0);
  }
  return p;
}

// The storm: a traced process (it holds `dev` open) whose two threads
// ping-pong a byte over pipes: context switches and syscalls as fast as the
// machine goes.
pid_t pipe_storm(const std::string& dev) {
  pid_t storm = ::fork();
  if (storm == 0) {
    int fd = ::open(dev.c_str(), O_RDONLY);
    (void)fd;
    int a[2], b[2];
    if (::pipe(a) || ::pipe(b)) ::_exit(1);
    std::thread t([&] {
      char c;
      while (::read(a[0], &c, 1) == 1)
        if (::write(b[1], &c, 1) != 1) break;
    });
    char c = 0;
    for (;;)
      if (::write(a[1], &c, 1) != 1 || ::read(b[0], &c, 1) != 1) break;
    ::_exit(0);
  }
  return storm;
}

// The kernel's own per-thread accounting of a process, summed over its
// threads: /proc/PID/task/*/schedstat (on-CPU ns, run-queue wait ns) and
// /proc/PID/task/*/status (voluntary and involuntary context switches).
struct KernelSched {
  double cpu_s = 0, wait_s = 0;
  double voluntary = 0, involuntary = 0;
};
KernelSched kernel_sched(pid_t pid) {
  KernelSched k;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    unsigned long long run = 0, wait = 0;
    if (std::sscanf(read_file(e.path().string() + "/schedstat").c_str(), "%llu %llu", &run, &wait) == 2) {
      k.cpu_s += static_cast<double>(run) / 1e9;
      k.wait_s += static_cast<double>(wait) / 1e9;
    }
    std::istringstream st(read_file(e.path().string() + "/status"));
    std::string line;
    while (std::getline(st, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) k.voluntary += std::stod(line.substr(24));
      if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) k.involuntary += std::stod(line.substr(27));
    }
  }
  return k;
}

// Every thread of `pid` in the stopped state (after SIGSTOP): none is on a CPU.
bool all_stopped(pid_t pid) {
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string s = read_file(e.path().string() + "/stat");
    auto r = s.rfind(')');
    if (r == std::string::npos || r + 2 >= s.size() || s[r + 2] != 'T') return false;
  }
  return true;
}

double sum_metric(const std::string& text, const std::string& name, const std::string& needle = "") {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 || (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' '))
      continue;
    if (!needle.empty() && line.find(needle) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Records the sched collector generated (emitted + lost to a full ring).
double sched_records(const std::string& m) {
  double n = 0;
  for (const char* c : {"sched_switch", "sched_wakeup"}) {
    std::string cls = std::string("class=\"") + c + "\"";
    n += metric_value(m, "steptrace_events_total", {cls}).value_or(0) +
         metric_value(m, "steptrace_events_dropped_total", {cls}).value_or(0);
  }
  return n;
}

// Connects to a unix socket as uid/gid 65534 (nobody) in a forked child,
// sends a dump request and returns what happened: the answer line, or
// "connect: <strerror>".
std::string control_as_nobody(const std::string& sock) {
  int pfd[2];
  if (::pipe(pfd) != 0) return "pipe";
  pid_t p = ::fork();
  if (p == 0) {
    ::close(pfd[0]);
    ::signal(SIGPIPE, SIG_IGN);  // a refusal may close the socket before the request is written
    std::string out;
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      out = "setuid failed";
    } else {
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      struct sockaddr_un a {};
      a.sun_family = AF_UNIX;
      std::strncpy(a.sun_path, sock.c_str(), sizeof(a.sun_path) - 1);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        out = std::string("connect: ") + std::strerror(errno);
      } else {
        (void)!::write(fd, "dump nobody\n", 12);
        char buf[256];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
      }
    }
    (void)!::write(pfd[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(pfd[1]);
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(pfd[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(pfd[0]);
  int st = 0;
  ::waitpid(p, &st, 0);
  return got;
}

// Runs `steptrace ctl --socket SOCK ARGS`: exit status and stdout+stderr.
std::pair<int, std::string> ctl(const DaemonRun& d, const std::string& args) {
  std::string out = d.dir + "/ctl.out";
  int rc = std::system((std::string(STEPTRACE_BIN) + " ctl --socket '" + d.sock + "' " + args + " > '" + out +
                        "' 2>&1").c_str());
  std::string text = read_file(out);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text};
}

nlohmann::json prom_query(int port, const std::string& q) {
  std::string path = "/api/v1/query?query=";
  for (unsigned char c : q) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') path += static_cast<char>(c);
    else {
      char b[4];
      std::snprintf(b, sizeof(b), "%%%02X", c);
      path += b;
    }
  }
  auto r = http_get(port, path, 10);
  if (r.status != 200) return nullptr;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return nullptr;
  return j["data"]["result"];
}

}  // namespace

TEST_CASE("daemon: Prometheus scrapes per-category series and the verdict of trainsim data-bound", "[root][daemon]") {
  require_root();
  REQUIRE(::access(PROMETHEUS_BIN, X_OK) == 0);  // Debian package `prometheus`
  std::string sim_dir = make_tmpdir("simdev");
  std::vector<std::string> extra = {"--window", "3", "--scan-ms", "250", "--max-cpu", "100", "--host", "ci-node"};
  for (int i = 0; i < 4; ++i) {
    extra.push_back("--accel-dev");
    extra.push_back(sim_dir + "/neuron" + std::to_string(i));
  }
  extra.push_back("--rdma-dev");
  extra.push_back(sim_dir + "/uverbs0");
  DaemonRun d("prom", extra);

  // Prometheus on loopback, scraping every second.
  int prom_port = free_port();
  std::ofstream(d.dir + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                              "scrape_configs:\n  - job_name: steptrace\n    static_configs:\n"
                                              "      - targets: ['127.0.0.1:"
                                           << d.port << "']\n";
  Proc prom({PROMETHEUS_BIN, "--config.file=" + d.dir + "/prometheus.yml", "--storage.tsdb.path=" + d.dir + "/tsdb",
             "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
            d.dir + "/prometheus.log");

  // A 1 MiB buffer registered in every step (a registration cache that misses): EFA control-path
  // calls inside steps, a few hundred microseconds each.
  Proc sim({TRAINSIM_BIN, "--scenario", "data-bound", "--steps", "200", "--dev-dir", sim_dir, "--mr-per-step-bytes",
            "1m"},
           d.dir + "/trainsim.log");
  // While it runs: SIGUSR1 dumps the flight recorder; HTTP is read-only
  // (dumps through the control socket: "daemon: dumps only through ...").
  std::this_thread::sleep_for(6s);
  REQUIRE(sim.running());
  REQUIRE(d.metric("steptrace_tracked_processes") >= 1);
  ::kill(d.proc.pid(), SIGUSR1);
  CHECK(http_post(d.port, "/dump").status == 405);
  CHECK(http_post(d.port, "/dump", "body").status == 405);
  CHECK(http_get(d.port, "/../../etc/passwd").status == 404);  // no files served

  INFO(read_file(d.dir + "/trainsim.log"));
  REQUIRE(sim.wait(150) == 0);
  std::this_thread::sleep_for(5s);  // last window + scrape

  // The flight-recorder capture: 0600, readable by `steptrace report`.
  std::string cap;
  for (const auto& e : fs::directory_iterator(d.dir + "/dumps"))
    if (e.path().extension() == ".cap") cap = e.path().string();
  REQUIRE(!cap.empty());
  struct stat st {};
  REQUIRE(::stat(cap.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(std::system((std::string(STEPTRACE_BIN) + " report --json - '" + cap + "' > " + d.dir + "/report.json").c_str()) == 0);
  auto rep = nlohmann::json::parse(read_file(d.dir + "/report.json"), nullptr, false);
  REQUIRE_FALSE(rep.is_discarded());
  // The dump carries clock anchors (taken every 10 s, and one as it was cut), as a recording does:
  // dumps of one job from several hosts line up (steptrace report A.cap B.cap).
  CHECK(rep["source"]["clock"]["anchors"].get<int>() >= 2);
  CHECK(rep["source"]["clock"]["out_of_order"] == 0);

  INFO(read_file(d.log));
  // Prometheus' view.
  auto up = prom_query(prom_port, "up{job=\"steptrace\"}");
  REQUIRE(up.is_array());
  REQUIRE(up.size() == 1);
  CHECK(up[0]["value"][1] == "1");
  auto cats = prom_query(prom_port, "sum by (category) (steptrace_category_seconds_total{host=\"ci-node\"})");
  REQUIRE(cats.is_array());
  CHECK(cats.size() == 7);
  std::map<std::string, double> by_cat;
  for (const auto& s : cats) by_cat[s["metric"]["category"]] = std::stod(s["value"][1].get<std::string>());
  for (const auto& [c, v] : by_cat) std::fprintf(stderr, "prometheus: category_seconds{category=%s} = %.3f\n", c.c_str(), v);
  std::string top;
  for (const auto& [c, v] : by_cat)
    if (top.empty() || v > by_cat[top]) top = c;
  CHECK(top == "data_loading");
  CHECK(by_cat["data_loading"] > 1.0);
  // Per rank: the series carry training_job and rank; `job` is the scrape
  // job's (no exported_job: the daemon exports no `job` of its own), no pid.
  auto per_rank = prom_query(prom_port, "steptrace_category_seconds_total{category=\"data_loading\"} > 0");
  REQUIRE(per_rank.is_array());
  CHECK(per_rank.size() >= 2);
  for (const auto& s : per_rank) {
    INFO(s.dump());
    CHECK(s["metric"].contains("rank"));
    CHECK(s["metric"].contains("training_job"));
    CHECK(s["metric"]["job"] == "steptrace");
    CHECK_FALSE(s["metric"].contains("exported_job"));
    CHECK_FALSE(s["metric"].contains("pid"));
  }
  // The pids are in one info series per rank process, joined on (training_job, rank).
  auto info = prom_query(prom_port, "steptrace_rank_info");
  REQUIRE(info.is_array());
  CHECK(info.size() >= 2);
  for (const auto& s : info) {
    INFO(s.dump());
    CHECK(s["metric"].contains("pid"));
    CHECK(s["metric"].contains("comm"));
    CHECK(s["metric"].contains("training_job"));
  }
  auto joined = prom_query(prom_port,
                           "sum by (training_job, rank) (steptrace_category_seconds_total) * on (training_job, rank) "
                           "group_left (pid) steptrace_rank_info");
  REQUIRE(joined.is_array());
  CHECK(joined.size() == per_rank.size());
  // Across everything the daemon exports, read directly: no `job`, no `pid`
  // outside the info metric, every family in one group; and promtool's lint
  // (HELP, TYPE, names, units) finds nothing.
  {
    const std::string m = d.metrics();
    INFO(m.substr(0, 3000));
    auto problems = exposition_problems(m);
    for (const auto& p : problems) std::fprintf(stderr, "exposition: %s\n", p.c_str());
    CHECK(problems.empty());
    CHECK(promtool_check_metrics(m, d.dir) == "");
  }
  // The verdict gauge: data_loading in most scrapes while the job ran.
  auto v = prom_query(prom_port, "sum by (verdict) (count_over_time((steptrace_verdict == 1)[5m:1s]))");
  REQUIRE(v.is_array());
  std::map<std::string, double> verdicts;
  for (const auto& s : v) verdicts[s["metric"]["verdict"]] = std::stod(s["value"][1].get<std::string>());
  for (const auto& [c, n] : verdicts) std::fprintf(stderr, "prometheus: seconds with verdict=%s: %.0f\n", c.c_str(), n);
  double others = 0;
  for (const auto& [c, n] : verdicts)
    if (c != "data_loading" && c != "none") others += n;
  CHECK(verdicts["data_loading"] > 0);
  CHECK(verdicts["data_loading"] > others);
  auto steps = prom_query(prom_port, "sum(steptrace_step_duration_seconds_count)");
  REQUIRE(steps.is_array());
  REQUIRE(steps.size() == 1);
  double nsteps = std::stod(steps[0]["value"][1].get<std::string>());
  std::fprintf(stderr, "prometheus: steps counted = %.0f\n", nsteps);
  CHECK(nsteps >= 100);  // 2 ranks x 200 steps, minus the steps cut at window edges
  // EFA control path: reg_mr + dereg_mr in every step of both ranks.
  auto efa = prom_query(prom_port, "sum(steptrace_efa_control_calls_total{where=\"in_steps\"})");
  REQUIRE(efa.is_array());
  REQUIRE(efa.size() == 1);
  double efa_calls = std::stod(efa[0]["value"][1].get<std::string>());
  std::fprintf(stderr, "prometheus: EFA control-path calls inside steps = %.0f (steps %.0f)\n", efa_calls, nsteps);
  CHECK(efa_calls >= 2 * nsteps * 0.9);  // two calls per counted step (the window's first steps are not counted)
  CHECK(efa_calls <= 2 * 2 * 200 + 8);
  // Overhead, for the record.
  auto cpu = prom_query(prom_port, "sum(increase(steptrace_tracer_cpu_seconds_total[5m]))");
  auto rss = prom_query(prom_port, "max_over_time(steptrace_resident_memory_bytes[5m])");
  if (cpu.is_array() && !cpu.empty() && rss.is_array() && !rss.empty())
    std::fprintf(stderr, "prometheus: tracer cpu seconds (5m) = %s, max rss = %s bytes\n",
                 cpu[0]["value"][1].get<std::string>().c_str(), rss[0]["value"][1].get<std::string>().c_str());
  prom.stop(10);
  CHECK(d.proc.stop(10) == 0);  // SIGTERM: clean exit
  std::system(("rm -rf '" + sim_dir + "'").c_str());
}

// The daemon samples the device counters as a session does: each rank's
// datastore (trainsim's devices carry one), read every 10 ms while attached.
// A dump carries them as notes, so `steptrace report` on it splits device
// time by the datastore ("nds"), not by the ranks' arrival skew.
TEST_CASE("daemon: the ranks' datastores are sampled, and a dump's report splits device time by them",
          "[root][daemon]") {
  require_root();
  std::string sim_dir = make_tmpdir("nds-dev");
  std::vector<std::string> extra = {"--window", "2", "--scan-ms", "100", "--max-cpu", "100", "--dev-root", sim_dir,
                                    "--sysfs-root", sim_dir + "/sys"};
  for (int i = 0; i < 2; ++i) {
    extra.push_back("--accel-dev");
    extra.push_back(sim_dir + "/neuron" + std::to_string(i));
  }
  DaemonRun d("nds", extra);
  Proc sim({TRAINSIM_BIN, "--scenario", "compute-bound", "--ranks", "2", "--duration", "12", "--dev-dir", sim_dir},
           d.dir + "/trainsim.log");
  auto until = [](auto pred, std::chrono::seconds within) { return poll_until(pred, within); };
  REQUIRE(until([&] { return d.metric("steptrace_tracked_processes") >= 2; }, 20s));
  std::this_thread::sleep_for(5s);  // steps with executions in the flight recorder
  REQUIRE(sim.running());
  ::kill(d.proc.pid(), SIGUSR1);
  INFO(read_file(d.log).substr(0, 6000));
  REQUIRE(until([&] { return d.metric("steptrace_dumps_total", {"reason=\"signal\""}) >= 1; }, 30s));
  CHECK(sim.wait(60) == 0);
  std::string cap;
  for (const auto& e : fs::directory_iterator(d.dir + "/dumps"))
    if (e.path().extension() == ".cap") cap = e.path().string();
  REQUIRE(!cap.empty());
  REQUIRE(std::system((std::string(STEPTRACE_BIN) + " report --json - '" + cap + "' > " + d.dir + "/report.json")
                          .c_str()) == 0);
  auto rep = nlohmann::json::parse(read_file(d.dir + "/report.json"), nullptr, false);
  REQUIRE_FALSE(rep.is_discarded());
  const auto& sig = rep["job"]["device_signals"];
  INFO(sig.dump().substr(0, 2000));
  CHECK(sig["available"]["nds"]["available"] == true);
  CHECK(sig["device_split_source"] == "nds");
  int nds_steps = 0, steps = 0;
  for (const auto& r : rep["job"]["ranks"])
    for (const auto& st : r["steps"]) {
      ++steps;
      if (st["device"].contains("nds")) ++nds_steps;
    }
  std::printf("daemon dump: %d of %d steps split by the datastore\n", nds_steps, steps);
  CHECK(steps >= 20);
  // Nearly all: the sampler keeps its own clock while a window is analysed
  // (before it did, a sanitizer build split 0 to 116 of ~250).
  CHECK(nds_steps * 5 >= steps * 4);
  std::system(("rm -rf '" + sim_dir + "'").c_str());
}

TEST_CASE("daemon: many short-lived jobs and RSS stays flat", "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("longrun-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  DaemonRun d("longrun", {"--window", "2", "--scan-ms", "200", "--max-cpu", "100", "--flight-seconds", "5",
                          "--flight-mib", "8", "--accel-dev", dev});
  // ~55 s: a new 300 ms job every 100 ms, at most 6 at a time.
  std::vector<pid_t> live;
  uint64_t rss_warm = 0, rss_peak_late = 0;
  auto t0 = std::chrono::steady_clock::now();
  int started = 0;
  while (std::chrono::steady_clock::now() - t0 < 55s) {
    for (auto it = live.begin(); it != live.end();) {
      int st;
      if (::waitpid(*it, &st, WNOHANG) == *it) it = live.erase(it);
      else ++it;
    }
    if (live.size() < 6) {
      live.push_back(short_job(dev, 300));
      ++started;
    }
    auto el = std::chrono::steady_clock::now() - t0;
    if (el > 20s && rss_warm == 0) rss_warm = proc_rss(d.proc.pid());
    if (el > 40s) rss_peak_late = std::max(rss_peak_late, proc_rss(d.proc.pid()));
    std::this_thread::sleep_for(100ms);
  }
  for (pid_t p : live) ::waitpid(p, nullptr, 0);
  std::this_thread::sleep_for(1500ms);
  auto m = d.metrics();
  INFO(read_file(d.log).substr(0, 4000));
  double discovered = metric_value(m, "steptrace_discovered_processes_total").value_or(0);
  std::fprintf(stderr, "longrun: %d jobs started, %.0f discovered, rss at 20 s %.1f MiB, peak after 40 s %.1f MiB\n",
               started, discovered, static_cast<double>(rss_warm) / 1048576.0,
               static_cast<double>(rss_peak_late) / 1048576.0);
  CHECK(started > 100);
  CHECK(discovered > started / 2);
  CHECK(metric_value(m, "steptrace_tracked_processes").value_or(-1) == 0);  // all forgotten
  REQUIRE(rss_warm > 0);
  CHECK(rss_peak_late < rss_warm + (6u << 20));  // flat: under 6 MiB growth after warm-up
  CHECK(d.proc.running());
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: an event storm is held under the CPU budget and the degradation is reported", "[root][daemon]") {
  require_root();
  const double budget = 5;
  std::string devdir = make_tmpdir("budget-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  DaemonRun d("budget", {"--window", "2", "--scan-ms", "500", "--max-cpu", std::to_string(budget), "--accel-dev", dev});
  pid_t storm = pipe_storm(dev);
  for (int i = 0; i < 50 && d.metric("steptrace_discovered_processes_total") < 1; ++i) std::this_thread::sleep_for(100ms);
  CHECK(d.metric("steptrace_discovered_processes_total") >= 1);  // the storm is a traced job
  // Wait for the ladder to settle (each step needs a full 5 s measurement).
  auto t0 = std::chrono::steady_clock::now();
  double level = 0, last_level = -1;
  auto stable_since = t0;
  while (std::chrono::steady_clock::now() - t0 < 70s) {
    std::this_thread::sleep_for(1s);
    level = d.metric("steptrace_degradation_level");
    if (level != last_level) {
      last_level = level;
      stable_since = std::chrono::steady_clock::now();
    }
    if (level >= 1 && std::chrono::steady_clock::now() - stable_since > 9s) break;
  }
  // Measure: userspace from /proc (not the daemon's own word) + BPF run time from its metric.
  double cpu0 = proc_cpu_s(d.proc.pid());
  double bpf0 = d.metric("steptrace_tracer_cpu_seconds_total", {"mode=\"bpf\""});
  auto m0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(6s);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
  double cpu = proc_cpu_s(d.proc.pid()) - cpu0;
  double bpf = d.metric("steptrace_tracer_cpu_seconds_total", {"mode=\"bpf\""}) - bpf0;
  ::kill(storm, SIGKILL);
  ::waitpid(storm, nullptr, 0);
  std::string log = read_file(d.log);
  INFO(log);
  std::fprintf(stderr, "budget: level %.0f, userspace %.2f%%, bpf %.2f%% of one core (budget %.1f%%)\n", level,
               100 * cpu / wall, 100 * bpf / wall, budget);
  CHECK(level >= 1);
  CHECK(d.metric("steptrace_degradations_total") >= 1);
  CHECK(log.find("degraded to level") != std::string::npos);
  CHECK(100 * (cpu + bpf) / wall < budget);
  CHECK(d.proc.running());
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: dumps only through the root-only control socket (modes, then SO_PEERCRED), HTTP is read-only",
          "[root][daemon]") {
  require_root();
  DaemonRun d("ctl", {"--scan-ms", "250"});
  auto captures = [&] {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d.dir + "/dumps", ec)) n += e.path().extension() == ".cap";
    return n;
  };
  auto until = [](auto pred) { return poll_until(pred, 10s); };
  INFO(read_file(d.log));

  // HTTP: GET only. POST /dump is 405 and writes nothing.
  CHECK(http_post(d.port, "/dump").status == 405);
  CHECK(http_post(d.port, "/dump", "body").status == 405);
  CHECK(http_get(d.port, "/").status == 200);
  std::this_thread::sleep_for(1s);
  CHECK(captures() == 0);

  // The socket and its directory: the daemon's (root here), 0600 and 0700.
  struct stat st {};
  REQUIRE(::stat((d.dir + "/run").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(st.st_uid == 0);
  REQUIRE(::lstat(d.sock.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);

  // Not root: the socket's mode refuses (directories opened for the test so that only the socket's 0600 is left).
  REQUIRE(::chmod(d.dir.c_str(), 0711) == 0);
  REQUIRE(::chmod((d.dir + "/run").c_str(), 0711) == 0);
  CHECK(control_as_nobody(d.sock) == "connect: Permission denied");
  // The socket opened to everyone: SO_PEERCRED still refuses, and counts it.
  REQUIRE(::chmod(d.sock.c_str(), 0666) == 0);
  const std::string refused = control_as_nobody(d.sock);
  INFO("as nobody, socket 0666: " << refused);
  CHECK(refused.rfind("error permission denied", 0) == 0);
  REQUIRE(::chmod(d.sock.c_str(), 0600) == 0);
  REQUIRE(::chmod((d.dir + "/run").c_str(), 0700) == 0);
  REQUIRE(::chmod(d.dir.c_str(), 0700) == 0);
  CHECK(until([&] { return d.metric("steptrace_control_refused_total") == 1; }));
  CHECK(read_file(d.log).find("refused a connection from uid 65534") != std::string::npos);
  std::this_thread::sleep_for(1s);
  CHECK(captures() == 0);

  // Root, through `steptrace ctl`: the capture appears and the path is printed.
  auto [rc, out] = ctl(d, "dump checking the control path");
  CHECK(rc == 0);
  INFO("ctl dump: " << out);
  REQUIRE(fs::exists(out));
  CHECK(captures() == 1);
  CHECK(out.find("-control.cap") != std::string::npos);  // the trigger names the file, the reason does not
  REQUIRE(::stat(out.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Manual dumps: one per dump_min_interval_seconds (300 s by default).
  auto again = ctl(d, "dump");
  CHECK(again.first == 1);
  CHECK(again.second.find("rate-limited") != std::string::npos);
  CHECK(captures() == 1);
  CHECK(until([&] { return d.metric("steptrace_control_requests_total", {"verb=\"dump\"", "result=\"ok\""}) == 1; }));

  // The other verbs: reload (as SIGHUP), level (the floor), and usage errors.
  CHECK(ctl(d, "reload").first == 0);
  CHECK(until([&] { return d.metric("steptrace_config_reloads_total", {"result=\"ok\""}) == 1; }));
  CHECK(ctl(d, "level aggregated").first == 0);
  CHECK(until([&] { return d.metric("steptrace_degradation_level") == 3; }));
  CHECK(d.metric("steptrace_degradation_floor") == 3);
  CHECK(ctl(d, "level auto").first == 0);
  CHECK(until([&] { return d.metric("steptrace_degradation_floor") == 0; }));
  CHECK(ctl(d, "level bogus").first == 1);
  CHECK(ctl(d, "frobnicate").first == 2);
  CHECK(d.proc.running());
}

TEST_CASE("daemon: SIGHUP reloads the config file, and a step far over p99 dumps the flight recorder",
          "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("hup-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  DaemonRun d("hup", {"--window", "1", "--scan-ms", "100", "--accel-dev", dev, "--auto-dump-factor", "3"});
  const std::string cfg = d.dir + "/empty.toml";

  // Reload: a new CPU budget from the file takes effect without a restart.
  std::ofstream(cfg) << "max_cpu_percent = 37\n";
  REQUIRE(::kill(d.proc.pid(), SIGHUP) == 0);
  auto until = [](auto pred) { return poll_until(pred, 10s); };
  CHECK(until([&] { return d.metric("steptrace_config_reloads_total", {"result=\"ok\""}) == 1; }));
  CHECK(d.metric("steptrace_cpu_budget_ratio") == Approx(0.37));
  // A broken file is refused: counted, logged, the running config kept.
  std::ofstream(cfg) << "max_cpu_percent = \"lots\"\n";
  REQUIRE(::kill(d.proc.pid(), SIGHUP) == 0);
  CHECK(until([&] { return d.metric("steptrace_config_reloads_total", {"result=\"error\""}) == 1; }));
  CHECK(d.metric("steptrace_cpu_budget_ratio") == Approx(0.37));
  CHECK(d.proc.running());
  // Raising degrade_level applies at once (the steps below are counted at that level too).
  CHECK(d.metric("steptrace_degradation_level") == 0);
  std::ofstream(cfg) << "max_cpu_percent = 37\ndegrade_level = \"aggregated\"\n";
  REQUIRE(::kill(d.proc.pid(), SIGHUP) == 0);
  CHECK(until([&] { return d.metric("steptrace_config_reloads_total", {"result=\"ok\""}) == 2; }));
  CHECK(until([&] { return d.metric("steptrace_degradation_level") == 3; }));
  CHECK(d.metric("steptrace_aggregation_enabled") == 1);
  CHECK(d.metric("steptrace_degradation_floor") == 3);

  // Auto dump: 200 steps of ~15 ms with step 150 taking 400 ms more, in a
  // job that holds the accelerator file open (so discovery picks it up).
  Proc job({"/bin/sh", "-c", "exec 3<'" + dev + "'; exec " + std::string(MARKER_DEMO) + " 200 10 5 150 400"},
           d.dir + "/job.log");
  CHECK(job.wait(60) == 0);
  CHECK(until([&] { return d.metric("steptrace_dumps_total", {"reason=\"slow_step\""}) >= 1; }));
  INFO(read_file(d.log).substr(0, 4000));
  int captures = 0;
  for (const auto& e : fs::directory_iterator(d.dir + "/dumps")) {
    if (e.path().extension() != ".cap") continue;
    ++captures;
    // The dump is a capture the report command reads.
    CHECK(std::system((std::string(STEPTRACE_BIN) + " report '" + e.path().string() + "' > /dev/null").c_str()) == 0);
  }
  CHECK(captures >= 1);
  CHECK(read_file(d.log).find("slow step") != std::string::npos);
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: a change in step time is logged with its rank and category, exported and dumps the flight recorder",
          "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("change-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  DaemonRun d("change", {"--window", "1", "--scan-ms", "100", "--max-cpu", "100", "--accel-dev", dev});
  auto until = [](auto pred) { return poll_until(pred, 20s, 200ms); };
  // 240 steps of 10 ms asleep + 5 ms on the CPU; from step 120 on, 20 ms on the CPU.
  Proc job({"/bin/sh", "-c", "exec 3<'" + dev + "'; exec " + std::string(MARKER_DEMO) + " 240 10 5 -1 0 120 20"},
           d.dir + "/job.log");
  CHECK(job.wait(60) == 0);
  CHECK(until([&] { return d.metric("steptrace_step_time_changes_total", {"direction=\"slower\""}) == 1; }));
  INFO(read_file(d.log).substr(0, 6000));
  // Nothing before it: the first 120 steps are one level.
  CHECK(d.metric("steptrace_step_time_changes_total", {"direction=\"faster\""}) == 0);
  CHECK(d.metric("steptrace_step_time_change_ratio") > 1.3);
  CHECK(d.metric("steptrace_step_time_change_cause_seconds", {"category=\"host_overhead\"", "rank=\"0\""}) > 0.008);
  const double wall = d.metric("steptrace_step_time_change_timestamp_seconds");
  CHECK(std::abs(wall - static_cast<double>(::time(nullptr))) < 60);
  CHECK(read_file(d.log).find("step time rose") != std::string::npos);
  CHECK(read_file(d.log).find("host_overhead +") != std::string::npos);
  CHECK(until([&] { return d.metric("steptrace_dumps_total", {"reason=\"step_time_change\""}) == 1; }));
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: a job whose steps stop is reported as a hang (what its main thread does), dumped, and cleared",
          "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("hang-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  DaemonRun d("hang", {"--window", "1", "--scan-ms", "100", "--max-cpu", "100", "--accel-dev", dev, "--hang-after", "2"});
  auto until = [](auto pred, std::chrono::seconds limit) { return poll_until(pred, limit); };
  // 15 ms steps; step 100 sleeps 8 s more: a stall in the job's own code.
  Proc job({"/bin/sh", "-c", "exec 3<'" + dev + "'; exec " + std::string(MARKER_DEMO) + " 160 10 5 100 8000"},
           d.dir + "/job.log");
  CHECK(until([&] { return d.metric("steptrace_hang_active") == 1; }, 30s));
  INFO(read_file(d.log).substr(0, 6000));
  CHECK(d.metric("steptrace_hangs_total") == 1);
  CHECK(read_file(d.log).find("HANG: no step ended") != std::string::npos);
  CHECK(read_file(d.log).find("asleep in clock_nanosleep") != std::string::npos);
  CHECK(until([&] { return d.metric("steptrace_dumps_total", {"reason=\"hang\""}) == 1; }, 15s));
  // The steps go on: the hang is over, and counted once.
  CHECK(until([&] { return d.metric("steptrace_hang_active") == 0; }, 20s));
  CHECK(d.metric("steptrace_hangs_total") == 1);
  CHECK(job.wait(30) == 0);
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: a tracer rebuild that fails stops the daemon with a non-zero exit (systemd restarts it)",
          "[root][daemon]") {
  require_root();
  // The daemon loads with a copy of the kernel's BTF; the copy is then
  // broken, so the rebuild that raising degrade_level to no_net forces
  // (the net collector goes) cannot load the programs any more.
  std::string btfdir = make_tmpdir("rebuild-btf");
  const std::string btf = btfdir + "/vmlinux";
  fs::copy_file("/sys/kernel/btf/vmlinux", btf);
  DaemonRun d("rebuild", {"--btf", btf, "--window", "1"});
  REQUIRE(d.metric("steptrace_collector_enabled", {"collector=\"net\""}) == 1);
  std::ofstream(btf, std::ios::trunc) << "not BTF\n";
  std::ofstream(d.dir + "/empty.toml") << "degrade_level = \"no_net\"\n";
  REQUIRE(::kill(d.proc.pid(), SIGHUP) == 0);
  int rc = d.proc.wait(30);
  INFO(read_file(d.log).substr(0, 4000));
  CHECK(rc == 1);  // -1 would be: still running
  CHECK(read_file(d.log).find("tracer rebuild failed") != std::string::npos);
  std::system(("rm -rf '" + btfdir + "'").c_str());
}

TEST_CASE("daemon: processes the full target set refuses are counted, logged once, exported and retried",
          "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("full-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  // Two entries: two holders of the device are traced, the others refused.
  DaemonRun d("full", {"--window", "1", "--scan-ms", "100", "--accel-dev", dev, "--max-targets", "2"});
  auto holder = [&](int i) {
    return Proc({"/bin/sh", "-c", "exec 3<'" + dev + "'; exec sleep 60"}, d.dir + "/h" + std::to_string(i) + ".log");
  };
  auto until = [](auto pred) { return poll_until(pred, 15s); };
  std::vector<Proc> holders;
  for (int i = 0; i < 2; ++i) holders.push_back(holder(i));
  CHECK(until([&] { return d.metric("steptrace_tracked_processes") == 2; }));
  CHECK(d.metric("steptrace_target_add_failures_total", {"cause=\"map_full\""}) == 0);
  for (int i = 2; i < 4; ++i) holders.push_back(holder(i));
  CHECK(until([&] { return d.metric("steptrace_target_add_failures_total", {"cause=\"map_full\""}) == 2; }));
  CHECK(d.metric("steptrace_untraced_processes") == 2);
  CHECK(d.metric("steptrace_bpf_losses_total", {"kind=\"target_add_failed\""}) == 2);
  // A window that missed them is marked.
  CHECK(until([&] { return d.metric("steptrace_window_incomplete") == 1; }));
  // Retried at every scan, counted once per process and logged once per cause.
  std::this_thread::sleep_for(500ms);
  CHECK(d.metric("steptrace_target_add_failures_total", {"cause=\"map_full\""}) == 2);
  auto count = [](const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
    return n;
  };
  INFO(read_file(d.log).substr(0, 4000));
  CHECK(count(read_file(d.log), "the target map is full") == 1);
  // A traced holder exits: its entry is freed at exit and a refused one takes it at the next scan.
  holders[0].stop(5);
  CHECK(until([&] { return d.metric("steptrace_untraced_processes") == 1; }));
  CHECK(read_file(d.log).find("added to the target set after an earlier refusal") != std::string::npos);
  for (auto& h : holders) h.stop(5);
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: at level aggregated the per-process CPU and run-queue counters agree with /proc schedstat",
          "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("agg-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  DaemonRun d("agg", {"--window", "2", "--scan-ms", "200", "--max-cpu", "400", "--degrade-level", "aggregated",
                      "--accel-dev", dev});
  pid_t storm = pipe_storm(dev);
  // Steps keep being counted (from the marker's uprobe records), categories are not.
  Proc job({"/bin/sh", "-c", "exec 3<'" + dev + "'; exec " + std::string(MARKER_DEMO) + " 100000 10 5"},
           d.dir + "/job.log");
  // No pid label: the storm's series is the one with its comm (the test
  // binary's, inherited over fork), which no other traced process has.
  std::string storm_comm = read_file("/proc/" + std::to_string(storm) + "/comm");
  while (!storm_comm.empty() && storm_comm.back() == '\n') storm_comm.pop_back();
  const std::string pid_label = "comm=\"" + storm_comm + "\"";
  auto until = [](auto pred, double s) { return poll_until(pred, std::chrono::duration<double>(s)); };
  INFO(read_file(d.log).substr(0, 4000));
  REQUIRE(until([&] { return metric_value(d.metrics(), "steptrace_process_cpu_seconds_total", {pid_label}); }, 15));
  CHECK(d.metric("steptrace_degradation_level") == 3);
  CHECK(d.metric("steptrace_aggregation_enabled") == 1);
  // Stop the storm at both ends of the interval: its threads are off CPU, so
  // the kernel's counts and the daemon's (read every second) settle.
  struct Snap {
    KernelSched k;
    double cpu = 0, wait = 0, vol = 0, invol = 0, sched = 0;
  };
  auto snap = [&] {
    ::kill(storm, SIGSTOP);
    REQUIRE(until([&] { return all_stopped(storm); }, 5));
    std::this_thread::sleep_for(2500ms);  // at least two reads of the map after the last switch-out
    Snap s;
    auto m = d.metrics();
    s.k = kernel_sched(storm);
    s.cpu = metric_value(m, "steptrace_process_cpu_seconds_total", {pid_label}).value_or(-1);
    s.wait = metric_value(m, "steptrace_process_runqueue_wait_seconds_total", {pid_label}).value_or(-1);
    s.vol = metric_value(m, "steptrace_process_context_switches_total", {pid_label, "type=\"voluntary\""}).value_or(-1);
    s.invol = metric_value(m, "steptrace_process_context_switches_total", {pid_label, "type=\"involuntary\""}).value_or(-1);
    s.sched = sched_records(m);
    ::kill(storm, SIGCONT);
    return s;
  };
  Snap a = snap();
  std::this_thread::sleep_for(10s);
  Snap b = snap();
  ::kill(storm, SIGKILL);
  ::waitpid(storm, nullptr, 0);
  double cpu = b.cpu - a.cpu, kcpu = b.k.cpu_s - a.k.cpu_s;
  double wait = b.wait - a.wait, kwait = b.k.wait_s - a.k.wait_s;
  double sw = (b.vol + b.invol) - (a.vol + a.invol);
  double ksw = (b.k.voluntary + b.k.involuntary) - (a.k.voluntary + a.k.involuntary);
  double inv = b.invol - a.invol, kinv = b.k.involuntary - a.k.involuntary;
  std::fprintf(stderr,
               "aggregated: on-CPU %.4f s (kernel %.4f s), run-queue wait %.4f s (kernel %.4f s), switches %.0f "
               "(kernel %.0f), involuntary %.0f (kernel %.0f), sched records %.0f\n",
               cpu, kcpu, wait, kwait, sw, ksw, inv, kinv, b.sched - a.sched);
  CHECK(kcpu > 1.0);  // the storm ran: the comparison means something
  CHECK(std::abs(cpu - kcpu) <= 0.03 * kcpu + 0.01);
  CHECK(kwait > 0.001);
  CHECK(std::abs(wait - kwait) <= 0.05 * kwait + 0.01);
  CHECK(ksw > 10000);
  CHECK(std::abs(sw - ksw) <= 0.02 * ksw + 10);
  CHECK(std::abs(inv - kinv) <= 0.05 * kinv + 50);
  // While the counters advanced, the ring buffer carried no sched records.
  CHECK(b.sched - a.sched == 0);
  auto m = d.metrics();
  job.stop(5);
  double steps = sum_metric(m, "steptrace_step_duration_seconds_count");
  std::fprintf(stderr, "aggregated: %.0f marker steps counted, category seconds %.3f\n", steps,
               sum_metric(m, "steptrace_category_seconds_total"));
  CHECK(steps > 100);
  CHECK(sum_metric(m, "steptrace_category_seconds_total") == 0);
  CHECK(metric_value(m, "steptrace_verdict", {"verdict=\"none\""}).value_or(0) == 1);
  CHECK(d.metric("steptrace_detail_windows_total", {"detail=\"on\""}) == 0);
  CHECK(d.metric("steptrace_detail_windows_total", {"detail=\"off\""}) >= 5);
  // The exited process's key is evicted and its series dropped (kept 10 s).
  CHECK(until([&] { return !metric_value(d.metrics(), "steptrace_process_cpu_seconds_total", {pid_label}); }, 20));
  // Keys the daemon deleted itself (the process exited) are not evictions.
  CHECK(d.metric("steptrace_bpf_losses_total", {"kind=\"agg_evicted\""}) == 0);
  CHECK(d.proc.running());
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: at level sampled detail comes from 1 of N windows and steps from every window",
          "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("sampled-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  // Side by side on the same workload: one daemon at full, one sampled (N = 4).
  DaemonRun full("full", {"--window", "1", "--scan-ms", "200", "--max-cpu", "400", "--accel-dev", dev});
  DaemonRun smp("sampled", {"--window", "1", "--scan-ms", "200", "--max-cpu", "400", "--degrade-level", "sampled",
                            "--sample-every", "4", "--accel-dev", dev});
  pid_t storm = pipe_storm(dev);
  // Steps: a marked step loop (~15 ms steps) that holds the device file too.
  Proc job({"/bin/sh", "-c", "exec 3<'" + dev + "'; exec " + std::string(MARKER_DEMO) + " 100000 10 5"},
           smp.dir + "/job.log");
  auto steps = [](const std::string& m) { return sum_metric(m, "steptrace_step_duration_seconds_count"); };
  // Both count steps (uprobe attached) before the measurement starts.
  auto t_end = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < t_end && (steps(full.metrics()) < 20 || steps(smp.metrics()) < 20))
    std::this_thread::sleep_for(200ms);
  INFO(read_file(smp.log).substr(0, 4000));
  REQUIRE(steps(full.metrics()) >= 20);
  REQUIRE(steps(smp.metrics()) >= 20);
  CHECK(smp.metric("steptrace_degradation_level") == 2);

  struct Poll {
    double cats, on, off, steps;
  };
  auto poll = [&] {
    auto m = smp.metrics();
    return Poll{sum_metric(m, "steptrace_category_seconds_total"),
                metric_value(m, "steptrace_detail_windows_total", {"detail=\"on\""}).value_or(-1),
                metric_value(m, "steptrace_detail_windows_total", {"detail=\"off\""}).value_or(-1), steps(m)};
  };
  std::string fm0 = full.metrics(), sm0 = smp.metrics();
  std::vector<Poll> polls{poll()};
  auto m0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - m0 < 16s) {
    std::this_thread::sleep_for(250ms);
    polls.push_back(poll());
  }
  std::string fm1 = full.metrics(), sm1 = smp.metrics();
  ::kill(storm, SIGKILL);
  ::waitpid(storm, nullptr, 0);
  job.stop(5);

  const double n = 4;
  double rec_full = sched_records(fm1) - sched_records(fm0);
  double rec_smp = sched_records(sm1) - sched_records(sm0);
  double steps_full = steps(fm1) - steps(fm0), steps_smp = steps(sm1) - steps(sm0);
  double on = polls.back().on - polls.front().on, off = polls.back().off - polls.front().off;
  // Per-category series move only in a poll where a detailed window closed;
  // steps also move where none did.
  int cat_moves = 0, cat_moves_without_detail = 0, step_moves_without_detail = 0;
  for (size_t i = 1; i < polls.size(); ++i) {
    bool detail_closed = polls[i].on > polls[i - 1].on;
    if (polls[i].cats > polls[i - 1].cats) {
      ++cat_moves;
      if (!detail_closed) ++cat_moves_without_detail;
    }
    if (polls[i].steps > polls[i - 1].steps && !detail_closed) ++step_moves_without_detail;
  }
  std::fprintf(stderr,
               "sampled: sched records/s full %.0f, sampled %.0f (ratio %.3f, 1/N = %.3f); windows on %.0f off %.0f; "
               "steps full %.0f sampled %.0f; category updates %d (%d without a detailed window), step updates "
               "without one %d\n",
               rec_full / 16, rec_smp / 16, rec_smp / rec_full, 1 / n, on, off, steps_full, steps_smp, cat_moves,
               cat_moves_without_detail, step_moves_without_detail);
  CHECK(rec_full > 10000);
  CHECK(rec_smp / rec_full > 0.5 / n);
  CHECK(rec_smp / rec_full < 1.7 / n);
  CHECK(on >= 2);
  CHECK(off >= 2 * on);
  CHECK(steps_full > 200);
  CHECK(steps_smp >= 0.85 * steps_full);  // detail windows alone would give ~1/N
  CHECK(cat_moves >= 2);
  CHECK(cat_moves_without_detail == 0);
  CHECK(step_moves_without_detail >= 3);
  CHECK(read_file(smp.log).find("'sampled'") != std::string::npos);
  CHECK(full.metric("steptrace_detail_windows_total", {"detail=\"off\""}) == 0);
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: tracer CPU at levels full, sampled and aggregated on one storm", "[root][daemon]") {
  require_root();
  std::string devdir = make_tmpdir("levels-dev");
  std::string dev = devdir + "/accel0";
  std::ofstream(dev) << "x";
  const char* levels[] = {"full", "sampled", "aggregated"};
  std::vector<std::unique_ptr<DaemonRun>> ds;
  for (const char* l : levels)
    ds.push_back(std::make_unique<DaemonRun>(std::string("cpu-") + l,
                                             std::vector<std::string>{"--window", "2", "--scan-ms", "200", "--max-cpu",
                                                                      "400", "--degrade-level", l, "--accel-dev", dev}));
  pid_t storm = pipe_storm(dev);
  for (int i = 0; i < 100; ++i) {
    bool all = true;
    for (auto& d : ds) all = all && d->metric("steptrace_tracked_processes") >= 1;
    if (all) break;
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);
  // 16 s: two whole sampling cycles of 4 windows of 2 s.
  std::vector<double> cpu0, bpf0;
  for (auto& d : ds) {
    cpu0.push_back(proc_cpu_s(d->proc.pid()));
    bpf0.push_back(d->metric("steptrace_tracer_cpu_seconds_total", {"mode=\"bpf\""}));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(16s);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> user, bpf;
  for (size_t i = 0; i < ds.size(); ++i) {
    user.push_back(100 * (proc_cpu_s(ds[i]->proc.pid()) - cpu0[i]) / wall);
    bpf.push_back(100 * (ds[i]->metric("steptrace_tracer_cpu_seconds_total", {"mode=\"bpf\""}) - bpf0[i]) / wall);
  }
  ::kill(storm, SIGKILL);
  ::waitpid(storm, nullptr, 0);
  for (size_t i = 0; i < ds.size(); ++i)
    std::fprintf(stderr, "levels: %-10s userspace %.2f%%, bpf %.2f%%, total %.2f%% of one core\n", levels[i], user[i],
                 bpf[i], user[i] + bpf[i]);
  const double want_level[] = {0, 2, 3};  // kLevels: full, sampled, aggregated
  for (size_t i = 0; i < ds.size(); ++i) CHECK(ds[i]->metric("steptrace_degradation_level") == want_level[i]);
  // Userspace work follows the records: sampled reads ~1/4 of them, aggregated none.
  CHECK(user[1] < user[0]);
  CHECK(user[2] < user[1]);
  CHECK(user[2] + bpf[2] < user[0] + bpf[0]);
  std::system(("rm -rf '" + devdir + "'").c_str());
}

TEST_CASE("daemon: a job whose environment names it with invalid UTF-8, an escape, a quote and a newline leaves "
          "/metrics valid (promtool check metrics)",
          "[root][daemon]") {
  require_root();
  REQUIRE(::access(PROMTOOL_BIN, X_OK) == 0);  // Debian package `prometheus`
  std::string sim_dir = make_tmpdir("hostile-dev");
  DaemonRun d("hostile", {"--window", "2", "--scan-ms", "250", "--max-cpu", "100", "--accel-dev", sim_dir + "/neuron0",
                          "--accel-dev", sim_dir + "/neuron1"});
  // Any process that may open /dev/neuron* chooses these bytes.
  const std::string job = "\xff\x1b[2J\"job\\\nx";
  Proc sim({"/usr/bin/env", "STEPTRACE_JOB=" + job, TRAINSIM_BIN, "--scenario", "compute-bound", "--ranks", "1",
            "--steps", "80", "--dev-dir", sim_dir},
           d.dir + "/trainsim.log");
  std::string m;
  auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end) {
    m = d.metrics();
    if (metric_value(m, "steptrace_step_duration_seconds_count").value_or(0) > 0) break;
    std::this_thread::sleep_for(250ms);
  }
  INFO(m.substr(0, 3000));
  INFO(read_file(d.dir + "/trainsim.log"));
  REQUIRE(metric_value(m, "steptrace_step_duration_seconds_count").value_or(0) > 0);
  // The label as written: U+FFFD for the bad byte, the control characters
  // written out (\x1b, \x0a) and the text format's own escapes (\\ and \").
  CHECK(m.find("training_job=\"\xef\xbf\xbd\\\\x1b[2J\\\"job\\\\\\\\\\\\x0ax\"") != std::string::npos);
  CHECK(m.find('\x1b') == std::string::npos);
  // Prometheus's own parser accepts the whole exposition, and its lint finds nothing.
  CHECK(promtool_check_metrics(m, d.dir) == "");
  CHECK(exposition_problems(m).empty());
  sim.stop(10);
  std::system(("rm -rf '" + sim_dir + "'").c_str());
}
