// SPDX-License-Identifier: Apache-2.0
// [root] tests of `steptrace daemon`, the real binary: a real Prometheus
// server scraping it while trainsim runs; a long run of short-lived jobs with
// flat RSS; an event storm that pushes it over its CPU budget.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/daemon_harness.h"

using namespace steptrace::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

void require_root() {
  INFO("[root] tests load BPF programs: run them as root");
  REQUIRE(::geteuid() == 0);
}

struct DaemonRun {
  std::string dir, log;
  int port = 0;
  Proc proc;
  DaemonRun(const std::string& tag, std::vector<std::string> extra) {
    dir = make_tmpdir(tag);
    REQUIRE(!dir.empty());
    log = dir + "/daemon.log";
    port = free_port();
    std::ofstream(dir + "/empty.toml") << "# test config\n";
    std::vector<std::string> argv = {STEPTRACE_BIN, "daemon", "--config", dir + "/empty.toml", "--listen",
                                     "127.0.0.1:" + std::to_string(port), "--dump-dir", dir + "/dumps"};
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

  Proc sim({TRAINSIM_BIN, "--scenario", "data-bound", "--steps", "200", "--dev-dir", sim_dir}, d.dir + "/trainsim.log");
  // While it runs: SIGUSR1 dumps the flight recorder; POST /dump too (rate-limited).
  std::this_thread::sleep_for(6s);
  REQUIRE(sim.running());
  REQUIRE(d.metric("steptrace_tracked_processes") >= 1);
  ::kill(d.proc.pid(), SIGUSR1);
  auto post = http_post(d.port, "/dump");
  CHECK((post.status == 200 || post.status == 429));
  CHECK(http_post(d.port, "/dump", "body").status == 400);  // requests with a body are refused
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
  // Per rank: the series carry job/rank/pid labels.
  auto per_rank = prom_query(prom_port, "steptrace_category_seconds_total{category=\"data_loading\"} > 0");
  REQUIRE(per_rank.is_array());
  CHECK(per_rank.size() >= 2);
  for (const auto& s : per_rank) {
    CHECK(s["metric"].contains("rank"));
    CHECK(s["metric"].contains("pid"));
    CHECK(s["metric"].contains("job"));
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
  // The storm: two threads ping-ponging over pipes (context switches + syscalls) in a traced process.
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
  auto until = [&](auto pred) {
    auto end = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };
  CHECK(until([&] { return d.metric("steptrace_config_reloads_total", {"result=\"ok\""}) == 1; }));
  CHECK(d.metric("steptrace_cpu_budget_percent") == Approx(37));
  // A broken file is refused: counted, logged, the running config kept.
  std::ofstream(cfg) << "max_cpu_percent = \"lots\"\n";
  REQUIRE(::kill(d.proc.pid(), SIGHUP) == 0);
  CHECK(until([&] { return d.metric("steptrace_config_reloads_total", {"result=\"error\""}) == 1; }));
  CHECK(d.metric("steptrace_cpu_budget_percent") == Approx(37));
  CHECK(d.proc.running());

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
