// SPDX-License-Identifier: Apache-2.0
// Daemon pieces that need no privileges: config, discovery parsers, the
// exposition format, the CPU budget ladder and the flight recorder.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "capture/capture_file.h"
#include "daemon/bpf_stats_duty.h"
#include "daemon/budget.h"
#include "daemon/config.h"
#include "daemon/exposition.h"
#include "util/text.h"
#include "daemon/daemon_harness.h"
#include "daemon/discovery.h"
#include "daemon/exposition.h"
#include "daemon/flight_recorder.h"
#include "steptrace_abi.h"

using namespace steptrace;
using namespace steptrace::daemon;

TEST_CASE("daemon config: TOML file, then flags override", "[daemon]") {
  DaemonConfig c;
  auto r = apply_config_toml(R"(
listen = "0.0.0.0:9999"
max_cpu_percent = 2
window_seconds = 5.5
accel_devs = ["/dev/a", "/dev/b"]
auto_dump = false
device_counters = false
dev_root = "/tmp/dev"
sched = "normal"
)", "test.toml", c);
  REQUIRE(r.ok());
  CHECK_FALSE(c.device_counters);
  CHECK(c.dev_root == "/tmp/dev");
  CHECK(c.sysfs_root == "/sys");
  CHECK(c.sched == "normal");
  CHECK(c.drain_ms == 100);  // the default: a quarter-full ring wakes the drain sooner
  CHECK(c.listen == "0.0.0.0:9999");
  CHECK(c.max_cpu_percent == 2.0);  // an integer is accepted for a float key
  CHECK(c.window_s == 5.5);
  CHECK(c.accel_devs == std::vector<std::string>{"/dev/a", "/dev/b"});
  CHECK_FALSE(c.auto_dump);

  const char* argv[] = {"daemon", "--max-cpu", "0.5", "--accel-dev", "/dev/c"};
  int code = 0;
  REQUIRE(parse_daemon_flags(5, argv, c, &code).ok());
  CHECK(c.max_cpu_percent == 0.5);
  CHECK(c.accel_devs == std::vector<std::string>{"/dev/c"});
  CHECK(c.listen == "0.0.0.0:9999");  // not given on the command line: the file's value stays
}

TEST_CASE("daemon config: errors name the problem", "[daemon]") {
  DaemonConfig c;
  auto unknown = apply_config_toml("lisen = \"x\"\n", "f.toml", c);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("unknown key 'lisen'") != std::string::npos);
  auto type = apply_config_toml("window_seconds = \"ten\"\n", "f.toml", c);
  REQUIRE_FALSE(type.ok());
  CHECK(type.error().message.find("window_seconds") != std::string::npos);
  auto syntax = apply_config_toml("listen = \n", "f.toml", c);
  CHECK_FALSE(syntax.ok());
  auto frac = apply_config_toml("scan_ms = 1.5\n", "f.toml", c);
  CHECK_FALSE(frac.ok());

  DaemonConfig v;
  CHECK(validate(v).ok());
  v.sched = "fifo";
  CHECK_FALSE(validate(v).ok());
  v.sched = "batch";
  v.ring_mib = 3;
  CHECK_FALSE(validate(v).ok());
  v = DaemonConfig{};
  v.max_cpu_percent = 0;
  CHECK_FALSE(validate(v).ok());
  v = DaemonConfig{};
  v.dump_dir = "relative";
  CHECK_FALSE(validate(v).ok());
  v = DaemonConfig{};
  v.collectors = "sched,bogus";
  CHECK_FALSE(validate(v).ok());

  auto l = split_listen("[::1]:19464");
  REQUIRE(l.ok());
  CHECK(l->first == "::1");
  CHECK(l->second == 19464);
  // A pod IP from the downward API (packaging/kubernetes), and the default port.
  auto pod = split_listen("10.1.2.3:19464");
  REQUIRE(pod.ok());
  CHECK(pod->first == "10.1.2.3");
  CHECK(DaemonConfig{}.listen == "127.0.0.1:19464");
  CHECK_FALSE(split_listen("127.0.0.1").ok());
  CHECK_FALSE(split_listen("127.0.0.1:99999").ok());
  CHECK_FALSE(split_listen("127.0.0.1:12x").ok());
}

TEST_CASE("daemon config: --config that cannot be read is an error", "[daemon]") {
  const char* argv[] = {"daemon", "--config", "/nonexistent/steptrace.toml"};
  int code = 0;
  auto r = load_config(3, argv, &code);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("/nonexistent/steptrace.toml") != std::string::npos);
}

TEST_CASE("daemon discovery parsers", "[daemon]") {
  std::vector<std::string> paths = {"/tmp/sim/neuron0"};
  CHECK(accel_link_matches("/tmp/sim/neuron0", paths));
  CHECK_FALSE(accel_link_matches("/tmp/sim/neuron01", paths));
  CHECK(accel_link_matches("/dev/neuron3", {}));
  CHECK_FALSE(accel_link_matches("/dev/neuron", {}));
  CHECK_FALSE(accel_link_matches("/dev/neuronx", {}));
  CHECK_FALSE(accel_link_matches("socket:[1234]", paths));

  std::string env = std::string("PATH=/bin\0RANK=3\0TORCHELASTIC_RUN_ID=run7\0", 42);
  auto id = parse_identity(env, "0::/kubepods/pod1/cri-abc.scope\n");
  CHECK(id.job == "run7");
  CHECK(id.rank == "3");
  auto id2 = parse_identity(std::string("A=1\0", 4), "0::/system.slice/train.service\n");
  CHECK(id2.job == "train.service");
  CHECK(id2.rank.empty());
  CHECK(parse_identity("", "0::/\n").job == "root");
  // Any process that can open /dev/neuron* chooses these bytes: labels stay
  // valid UTF-8 with no control characters, capped on a character boundary.
  auto bad = parse_identity(std::string("STEPTRACE_JOB=\xff\x1b[2J\0RANK=1\xe2\x82\0", 30), "0::/\n");
  CHECK(bad.job == "\xef\xbf\xbd\\x1b[2J");
  CHECK(bad.rank == "1\xef\xbf\xbd\xef\xbf\xbd");
  auto longjob = parse_identity("STEPTRACE_JOB=" + std::string(127, 'a') + "\xc3\xa9", "0::/\n");
  CHECK(longjob.job == std::string(127, 'a'));  // the 2-byte character would pass 128 bytes: left out

  CHECK(parse_stat_ppid("123 (a) b) c) S 77 123 123 0") == 77u);
  CHECK_FALSE(parse_stat_ppid("garbage").has_value());
}

TEST_CASE("daemon discovery: the launcher's node rank, and a daemon scoped to a cgroup", "[daemon]") {
  // torchrun says GROUP_RANK; Slurm SLURM_NODEID; the first set wins.
  auto id = parse_identity(std::string("RANK=5\0SLURM_NODEID=9\0GROUP_RANK=2\0", 35), "0::/\n");
  CHECK(id.node == "2");
  CHECK(parse_identity(std::string("SLURM_NODEID=4\0", 15), "0::/\n").node == "4");
  CHECK(parse_identity(std::string("RANK=1\0", 7), "0::/\n").node.empty());
  // v2 line, or any v1 hierarchy's path; the scope's own path or below it, not a sibling with its prefix.
  const std::string v2 = "0::/kubepods/burstable/pod-a/cri-1.scope\n";
  const std::string hybrid = "12:cpu,cpuacct:/sim/node1\n4:memory:/sim/node1\n0::/user.slice\n";
  CHECK(cgroup_in_scope(v2, "/kubepods/burstable/pod-a"));
  CHECK(cgroup_in_scope(v2, "/kubepods/burstable/pod-a/"));
  CHECK(cgroup_in_scope(v2, "/kubepods/burstable/pod-a/cri-1.scope"));
  CHECK_FALSE(cgroup_in_scope(v2, "/kubepods/burstable/pod"));
  CHECK_FALSE(cgroup_in_scope(v2, "/kubepods/besteffort"));
  CHECK(cgroup_in_scope(hybrid, "/sim/node1"));
  CHECK_FALSE(cgroup_in_scope(hybrid, "/sim/node0"));
  CHECK(cgroup_in_scope(hybrid, "/user.slice"));
  CHECK(cgroup_in_scope(hybrid, "/"));
  CHECK_FALSE(cgroup_in_scope("garbage without colons\n", "/"));
  CHECK_FALSE(cgroup_in_scope("", "/sim"));
  // A cgroup directory, as `attach --cgroup` takes it, becomes the path /proc/PID/cgroup shows.
  const std::string mounts =
      "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n/dev/sda1 / ext4 rw 0 0\n";
  CHECK(cgroup_scope_path("/sys/fs/cgroup/unified/sim/node1", mounts) == "/sim/node1");
  CHECK(cgroup_scope_path("/sys/fs/cgroup/pids/sim", mounts) == "/sim");
  CHECK(cgroup_scope_path("/sys/fs/cgroup/unified", mounts) == "/");
  CHECK(cgroup_scope_path("/sys/fs/cgroup/unifiedx/a", mounts) == "/sys/fs/cgroup/unifiedx/a");
  CHECK(cgroup_scope_path("/kubepods/burstable/pod-a", mounts) == "/kubepods/burstable/pod-a");
  CHECK(cgroup_scope_path("/sim/node1", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n") == "/sim/node1");
}

TEST_CASE("daemon discovery: a process in a pod is labelled by its pod, namespace and container", "[daemon]") {
  char tmpl[] = "/tmp/st-proc.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = std::string(tmpl) + "/41";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string cid(64, 'c');
  std::ofstream(dir + "/environ") << std::string("HOSTNAME=trainer-2\0RANK=2\0", 26);
  std::ofstream(dir + "/cgroup") << "0::/kubepods.slice/kubepods-pod0b6ab1d4_5f1c_4e43_9d2a_5a1b2c3d4e5f.slice/cri-containerd-"
                                 << cid << ".scope\n";
  std::ofstream(dir + "/comm") << "python3\n";
  ProcScanner scan(tmpl);
  auto id = scan.identity(41);
  CHECK(id.pod == "trainer-2");  // Kubernetes sets the hostname to the pod's name
  CHECK(id.container == cid.substr(0, 12));
  CHECK(id.job == "trainer-2");  // no launcher variable: the pod, not the container's cgroup directory
  CHECK(id.rank == "2");
  CHECK(id.comm == "python3");
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("exposition: escaping and number format", "[daemon]") {
  CHECK(escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(format_value(3) == "3");
  CHECK(format_value(0.25) == "0.25");
  CHECK(format_value(1.0 / 0.0) == "+Inf");
  Exposition x;
  x.family("m_total", "counter", "help text");
  x.sample("m_total", {{"training_job", "j\"1"}}, 2);
  CHECK(x.text() == "# HELP m_total help text\n# TYPE m_total counter\nm_total{training_job=\"j\\\"1\"} 2\n");
  // HELP text escapes backslash and newline (text format 0.0.4).
  Exposition h;
  h.family("g", "gauge", "a\\b\nc");
  CHECK(h.text() == "# HELP g a\\\\b\\nc\n# TYPE g gauge\n");
}

TEST_CASE("exposition check: interleaved families and target labels are found", "[daemon]") {
  using steptrace::test::exposition_problems;
  const std::string good =
      "# TYPE a_total counter\na_total{host=\"h\",training_job=\"j,=\\\"x\",rank=\"0\"} 1\n"
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"
      "# TYPE steptrace_rank_info gauge\nsteptrace_rank_info{pid=\"1\"} 1\n";
  CHECK(exposition_problems(good).empty());
  // The EFA families as they were: samples of the two families alternating.
  const std::string interleaved =
      "# TYPE c_total counter\n# TYPE s_total counter\nc_total{where=\"a\"} 1\ns_total{where=\"a\"} 1\n";
  CHECK(exposition_problems(interleaved).size() == 1);
  CHECK(exposition_problems("# TYPE x gauge\nx{job=\"j\"} 1\n").size() == 1);
  CHECK(exposition_problems("# TYPE x gauge\nx{rank=\"0\",pid=\"7\"} 1\n").size() == 1);
  CHECK(exposition_problems("# TYPE x gauge\nx 1\n# TYPE x gauge\n").size() == 1);
}

TEST_CASE("CPU budget: degrades in order, recovers after the hold time", "[daemon]") {
  BudgetController b(1.0);
  double t = 0;
  // 10% of a core: one level per measured window, up to the last level.
  int degrades = 0;
  for (int i = 0; i < 100; ++i) {
    t += 1;
    if (b.sample(t, 0.10, 1.0) == BudgetController::Action::degrade) ++degrades;
  }
  CHECK(degrades == kMaxLevel);
  CHECK(b.level() == kMaxLevel);
  CHECK(std::string(kLevels[b.level()].name) == "paused");
  // The documented order (README, steptrace(8), steptrace.toml).
  std::vector<std::string> names;
  for (const auto& l : kLevels) names.emplace_back(l.name);
  CHECK(names == std::vector<std::string>{"full", "slow_drain", "sampled", "aggregated", "no_net", "no_block",
                                          "no_sched", "paused"});
  CHECK(level_by_name("sampled") == kLevelSampled);
  CHECK(level_by_name("aggregated") == kLevelAggregated);
  CHECK(level_by_name("fast") == -1);
  // Quiet: no recovery before the hold time, one level after it.
  int recovers = 0;
  double start = t;
  for (int i = 0; i < 59; ++i) {
    t += 1;
    if (b.sample(t, 0.0, 1.0) == BudgetController::Action::recover) ++recovers;
  }
  CHECK(recovers == 0);
  for (int i = 0; i < 10; ++i) {
    t += 1;
    if (b.sample(t, 0.0, 1.0) == BudgetController::Action::recover) ++recovers;
  }
  CHECK(recovers == 1);
  CHECK(b.level() == kMaxLevel - 1);
  CHECK(t - start >= 60);
  // Under budget from the start: nothing happens.
  BudgetController ok(1.0);
  for (int i = 1; i < 30; ++i) CHECK(ok.sample(i, 0.005, 1.0) == BudgetController::Action::none);
  CHECK(ok.level() == 0);
}

TEST_CASE("CPU budget: a floor is where it starts and how far it recovers", "[daemon]") {
  BudgetController b(1.0);
  CHECK(b.set_floor(kLevelAggregated));  // raised at once
  CHECK(b.level() == kLevelAggregated);
  CHECK_FALSE(b.set_floor(kLevelAggregated));
  double t = 0;
  // Well under budget for far longer than the hold time: it stays at the floor.
  for (int i = 0; i < 300; ++i) {
    t += 1;
    CHECK(b.sample(t, 0.0, 1.0) == BudgetController::Action::none);
  }
  CHECK(b.level() == kLevelAggregated);
  // Over budget: it still degrades past the floor...
  t += 1;  // one second at 10% tips the 5 s average over 1%
  CHECK(b.sample(t, 0.10, 1.0) == BudgetController::Action::degrade);
  CHECK(b.level() == kLevelAggregated + 1);
  // ...and recovers back down to it, no further.
  int recovers = 0;
  for (int i = 0; i < 2000; ++i) {
    t += 1;
    recovers += b.sample(t, 0.0, 1.0) == BudgetController::Action::recover;
  }
  CHECK(recovers == 1);
  CHECK(b.level() == kLevelAggregated);
  // Lowering the floor lets it recover further.
  CHECK_FALSE(b.set_floor(0));
  for (int i = 0; i < 2000; ++i) {
    t += 1;
    b.sample(t, 0.0, 1.0);
  }
  CHECK(b.level() < kLevelAggregated);
}

TEST_CASE("CPU budget: a long measuring window judges a whole sampling cycle", "[daemon]") {
  // Sampled: one detailed window of 10 s (8% of a core) in every 4, 0.2% in
  // the others: 2.15% on average against a 3% budget. A 5 s window inside
  // the detailed one would degrade; a 40 s window sees the average.
  auto run = [](double window_s) {
    BudgetController b(3.0);
    b.set_floor(kLevelSampled);
    b.set_window(window_s);
    int degrades = 0;
    for (int t = 1; t <= 200; ++t) {
      bool detailed = ((t - 1) / 10) % 4 == 0;
      degrades += b.sample(t, detailed ? 0.08 : 0.002, 1.0) == BudgetController::Action::degrade;
      if (degrades) break;
    }
    return degrades;
  };
  CHECK(run(BudgetController::kWindowS) == 1);
  CHECK(run(40) == 0);
}

TEST_CASE("CPU budget: sampled-out windows alone over budget degrade without waiting for the cycle", "[daemon]") {
  // 2% of a core even in the cheap windows, 1% budget: the cycle cannot fit.
  auto first_degrade = [](bool mark_cheap) {
    BudgetController b(1.0);
    b.set_floor(kLevelSampled);
    b.set_window(40);
    for (int t = 1; t <= 100; ++t) {
      bool detailed = ((t - 1) / 10) % 4 == 0;
      if (b.sample(t, detailed ? 0.08 : 0.02, 1.0, mark_cheap && !detailed) == BudgetController::Action::degrade)
        return t;
    }
    return -1;
  };
  int fast = first_degrade(true), slow = first_degrade(false);
  CHECK(fast > 10);   // not in the detailed window...
  CHECK(fast <= 16);  // ...but after ~5 s of cheap samples
  CHECK(slow >= 39);  // unmarked: judged over the whole cycle
  // Cheap samples under budget never degrade by themselves.
  BudgetController ok(3.0);
  ok.set_floor(kLevelSampled);
  ok.set_window(40);
  for (int t = 1; t <= 30; ++t) CHECK(ok.sample(t, 0.02, 1.0, true) == BudgetController::Action::none);
}

TEST_CASE("detail cycle: sampled details the first window at the level and every N-th after it", "[daemon]") {
  DetailCycle c;
  std::string seen;
  auto run = [&](int windows) {
    for (int i = 0; i < windows; ++i) {
      seen += c.detail(kLevelSampled, 4) ? 'D' : '.';
      c.window_closed();
    }
  };
  // Started at sampled (--degrade-level): a fresh window, phase 0.
  c.restart();
  run(9);
  CHECK(seen == "D...D...D");
  // Degraded into sampled from slow_drain: the slow_drain window still open
  // is closed after the change; the first sampled window is detailed anyway.
  c.level_changed();
  c.window_closed();  // the old level's window
  seen.clear();
  run(5);
  CHECK(seen == "D...D");
  // Other levels: always (below) or never (above).
  CHECK(c.detail(0, 4));
  CHECK(c.detail(kLevelSlowDrain, 4));
  CHECK_FALSE(c.detail(kLevelAggregated, 4));
  CHECK_FALSE(c.detail(kLevelPaused, 4));
  CHECK(c.detail(kLevelSampled, 1));  // N = 1: every window
}

TEST_CASE("daemon config: degrade_level and sample_every", "[daemon]") {
  DaemonConfig c;
  CHECK(c.degrade_level == "full");
  CHECK(c.sample_every == 4);
  REQUIRE(apply_config_toml("degrade_level = \"aggregated\"\nsample_every = 8\n", "f.toml", c).ok());
  CHECK(c.degrade_level == "aggregated");
  CHECK(c.sample_every == 8);
  CHECK(validate(c).ok());
  const char* argv[] = {"daemon", "--degrade-level", "sampled", "--sample-every", "2"};
  int code = 0;
  REQUIRE(parse_daemon_flags(5, argv, c, &code).ok());
  CHECK(c.degrade_level == "sampled");
  CHECK(c.sample_every == 2);
  c.degrade_level = "cheap";
  auto bad = validate(c);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("no_sched") != std::string::npos);  // lists the levels
  c.degrade_level = "paused";
  c.sample_every = 0;
  CHECK_FALSE(validate(c).ok());
}

TEST_CASE("flight recorder: bounded by bytes and age, dumps a readable capture", "[daemon]") {
  FlightRecorder fr(2'000'000'000ull, 4 * FlightRecorder::kBlockBytes);
  std::vector<uint8_t> rec(sizeof(st_event_header) + 32, 0);
  auto put = [&](uint64_t ts) {
    st_event_header h{};
    h.size = static_cast<uint16_t>(rec.size());
    h.kind = ST_EV_TASK_COMM;
    h.ts_ns = ts;
    std::memcpy(rec.data(), &h, sizeof(h));
    fr.append(ts, rec.data(), rec.size());
  };
  for (uint64_t i = 0; i < 200'000; ++i) put(1'000'000'000ull + i);
  CHECK(fr.bytes() <= 4 * FlightRecorder::kBlockBytes);
  CHECK(fr.evicted_records() > 0);
  uint64_t held = fr.records();
  CHECK(held > 1000);
  // Age: everything older than 2 s goes, except the block being filled.
  put(10'000'000'000ull);
  fr.evict(10'000'000'000ull);
  CHECK(fr.records() < held);

  auto dir = test::make_tmpdir("fr");
  std::string path = dir + "/fr.cap";
  REQUIRE(fr.dump(path, nlohmann::json{{"host", "t"}, {"abi_version", ST_ABI_VERSION}}, DropStats{}, 1).ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  uint64_t n = 0;
  auto c = read_capture(path, [&](const void*, size_t len) {
    CHECK(len == rec.size());
    ++n;
  });
  REQUIRE(c.ok());
  CHECK(n == fr.records());
  // Never through a symlink.
  std::string link = dir + "/link.cap";
  REQUIRE(::symlink("/tmp/steptrace-should-not-exist", link.c_str()) == 0);
  REQUIRE(::symlink((dir + "/victim").c_str(), (link + ".tmp").c_str()) == 0);
  CHECK_FALSE(fr.dump(link, nlohmann::json{{"host", "t"}}, DropStats{}, 1).ok());
  CHECK(::access((dir + "/victim").c_str(), F_OK) != 0);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("daemon: a label value that is not UTF-8 cannot make Prometheus drop the scrape", "[daemon]") {
  // Any process that may open /dev/neuron* can set STEPTRACE_JOB=$'\xff'.
  std::string label = steptrace::daemon::escape_label_value("job\xff\"x\n");
  CHECK(label == "job\xef\xbf\xbd\\\"x\\n");
  CHECK(steptrace::valid_utf8(label) == label);
}

TEST_CASE("BPF statistics one second in ten: measured seconds counted whole, the rate without them carried over",
          "[daemon]") {
  // 50 ns a run is the statistics' own read; the programs run 10 000 times a
  // second at 100 ns measured: 1 ms a measured second, 0.5 ms without them.
  StatsDutyPolicy p(10, true, 50);
  REQUIRE(p.cycling());
  uint64_t ns = 0, cnt = 0;
  CHECK(p.account(0, ns, cnt) == 0);  // the first call only starts
  CHECK(p.want_on());
  ns += 1'000'000;
  cnt += 10'000;
  CHECK(p.account(1, ns, cnt) == Approx(0.0015));  // 1 ms measured + 10 000 x 50 ns of the other read
  CHECK(p.rate() == Approx(0.0005));
  CHECK_FALSE(p.want_on());
  // Off: the counters stand still; each second counts the carried rate.
  int on_at = -1;
  for (int t = 2; t <= 10; ++t) {
    CHECK(p.account(t, ns, cnt) == Approx(0.0005));
    if (p.want_on() && on_at < 0) on_at = t;
  }
  CHECK(on_at == 10);  // on again after nine seconds off
  ns += 2'000'000;  // the programs got busier: measured, and the new rate carried
  cnt += 20'000;
  CHECK(p.account(11, ns, cnt) == Approx(0.003));
  CHECK(p.rate() == Approx(0.001));
  CHECK_FALSE(p.want_on());
  CHECK(p.account(12, ns, cnt) == Approx(0.001));
  // The programs change (another level): the next call turns them on, the one after measures.
  p.remeasure();
  CHECK(p.account(13, ns, cnt) == Approx(0.001));
  CHECK(p.want_on());
  ns += 100'000;
  cnt += 1'000;
  CHECK(p.account(14, ns, cnt) == Approx(0.00015));
  CHECK(p.rate() == Approx(0.00005));
  CHECK_FALSE(p.want_on());
}

TEST_CASE("BPF statistics under the sysctl, or every second: counted as the kernel counts them", "[daemon]") {
  for (auto p : {StatsDutyPolicy(10, false, 50), StatsDutyPolicy(1, true, 50)}) {
    CHECK_FALSE(p.cycling());
    (void)p.account(0, 0, 0);
    for (int t = 1; t <= 12; ++t) {
      CHECK(p.account(t, 1'000'000ull * static_cast<uint64_t>(t), 10'000ull * static_cast<uint64_t>(t)) ==
            Approx(0.001));
      CHECK(p.want_on());
    }
  }
}
