// SPDX-License-Identifier: Apache-2.0
// Faults (issue 8): what production throws at steptrace. SIGKILL mid-run,
// a job that forks/execs/is killed/reuses pids/churns threads, a ring-buffer
// storm, two instances at once, and a broken environment (no BTF, no
// privileges, lockdown, no tracefs, bad arguments): no crash, no leak, no
// misattribution, and one clear line plus a non-zero exit where tracing
// cannot work.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loader/features.h"
#include "loader/preflight.h"
#include "loader/ring_keeper.h"
#include "loader/ring_reader.h"
#include "loader/tracer.h"
#include "support/workload.h"

using namespace steptrace;
using namespace steptrace::test;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kBin = STEPTRACE_BIN;

struct Run {
  int rc = -1;
  std::string out;   // stdout + stderr
  long maxrss_kib = 0;
};

// fork + exec argv (stdout+stderr captured), optionally as an unprivileged user.
Run run(const std::vector<std::string>& argv, bool drop_privileges = false) {
  char path[] = "/tmp/steptrace-faults-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  unlink(path);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    if (drop_privileges) {
      // nobody/nogroup: no capabilities left after the uid change
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
    }
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  int st = 0;
  struct rusage ru {};
  REQUIRE(wait4(pid, &st, 0, &ru) == pid);
  Run r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.maxrss_kib = ru.ru_maxrss;
  lseek(fd, 0, SEEK_SET);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  close(fd);
  return r;
}

std::string sh_out(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  pclose(f);
  return out;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

nlohmann::json json_of(const std::string& out) {
  auto b = out.find('{');
  REQUIRE(b != std::string::npos);
  return nlohmann::json::parse(out.substr(b));
}

// BPF objects a process holds, from /proc/PID/fdinfo (exact, unlike a name match:
// other steptrace instances may run on the same host).
struct BpfIds {
  std::set<uint32_t> progs, maps, links;
};
BpfIds bpf_ids_of(pid_t pid) {
  BpfIds ids;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return ids;
  while (dirent* e = readdir(d)) {
    char target[256] = {};
    if (readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1) <= 0) continue;
    std::string t = target;
    const char* key = t == "anon_inode:bpf-prog" ? "prog_id:" : t == "anon_inode:bpf-map" ? "map_id:"
                      : t == "anon_inode:bpf_link"                                     ? "link_id:"
                                                                                        : nullptr;
    if (!key) continue;
    std::ifstream info("/proc/" + std::to_string(pid) + "/fdinfo/" + e->d_name);
    for (std::string line; std::getline(info, line);) {
      if (line.rfind(key, 0) != 0) continue;
      uint32_t id = static_cast<uint32_t>(std::stoul(line.substr(std::strlen(key))));
      (t == "anon_inode:bpf-prog" ? ids.progs : t == "anon_inode:bpf-map" ? ids.maps : ids.links).insert(id);
    }
  }
  closedir(d);
  return ids;
}

// What `bpftool <kind> list -j` shows: id -> name ("" for links).
std::map<uint32_t, std::string> bpftool_list(const std::string& kind) {
  auto j = nlohmann::json::parse(sh_out("bpftool " + kind + " list -j 2>/dev/null"), nullptr, false);
  std::map<uint32_t, std::string> out;
  if (!j.is_array()) return out;
  for (const auto& o : j) out[o.value("id", 0u)] = o.value("name", std::string());
  return out;
}

bool kernel_at_least(int major, int minor) {
  struct utsname u {};
  uname(&u);
  int a = 0, b = 0;
  std::sscanf(u.release, "%d.%d", &a, &b);
  return a > major || (a == major && b >= minor);
}

template <typename T>
T* shared_mem() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return new (p) T{};
}

}  // namespace

TEST_CASE("faults: SIGKILL of steptrace mid-run leaves no BPF programs, links or maps behind", "[root][faults]") {
  require_root();
  REQUIRE(system("command -v bpftool >/dev/null 2>&1") == 0);
  pid_t st = fork();
  REQUIRE(st >= 0);
  if (st == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(kBin.c_str(), kBin.c_str(), "run", "--", "sleep", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until it has attached (links held) and launched the job.
  BpfIds ids;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  std::string job_children;
  while (Clock::now() < deadline) {
    ids = bpf_ids_of(st);
    std::ifstream c("/proc/" + std::to_string(st) + "/task/" + std::to_string(st) + "/children");
    std::getline(c, job_children);
    if (ids.links.size() >= 8 && !job_children.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ids = bpf_ids_of(st);
  INFO("steptrace holds " << ids.progs.size() << " programs, " << ids.maps.size() << " maps, " << ids.links.size()
                          << " links");
  REQUIRE(ids.links.size() >= 8);
  REQUIRE(ids.progs.size() >= 8);
  REQUIRE(ids.maps.size() >= 4);
  // bpftool sees them, with our names: the check below could fail.
  auto progs = bpftool_list("prog");
  size_t ours = 0;
  for (auto id : ids.progs)
    if (progs.count(id) && progs[id].rfind("st_", 0) == 0) ++ours;
  CHECK(ours == ids.progs.size());

  REQUIRE(kill(st, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(st, &status, 0) == st);
  CHECK(WIFSIGNALED(status));
  // The job is left running (steptrace never takes the job down with it): clean it up here.
  for (std::istringstream in(job_children); in;) {
    pid_t c = 0;
    if (in >> c && c > 0) kill(c, SIGKILL);
  }

  // Freed by the kernel once the last fd is gone; give deferred frees a moment.
  size_t left = 0;
  std::string leftovers;
  for (int i = 0; i < 100; ++i) {
    auto p = bpftool_list("prog"), m = bpftool_list("map"), l = bpftool_list("link");
    left = 0;
    leftovers.clear();
    for (auto id : ids.progs)
      if (p.count(id)) ++left, leftovers += " prog " + std::to_string(id) + " " + p[id];
    for (auto id : ids.maps)
      if (m.count(id)) ++left, leftovers += " map " + std::to_string(id) + " " + m[id];
    for (auto id : ids.links)
      if (l.count(id)) ++left, leftovers += " link " + std::to_string(id);
    if (left == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO("left behind:" << leftovers);
  CHECK(left == 0);
}

TEST_CASE("faults: a job that forks, execs, is killed, reuses pids and churns threads", "[root][faults]") {
  require_root();
  struct Shared {
    std::atomic<int> old_pid{0}, exec_pid{0}, killed_pid{0};
    std::atomic<int> reuse_done{0};
  };
  auto* sh = shared_mem<Shared>();
  constexpr int kBatches = 50, kPerBatch = 40, kOldNaps = 7;
  Workload w([sh] {
    // Thread churn: 2000 short-lived threads, 40 at a time.
    for (int b = 0; b < kBatches; ++b) {
      std::vector<std::thread> ts;
      for (int i = 0; i < kPerBatch; ++i) ts.emplace_back([] { sched_yield(); });
      for (auto& t : ts) t.join();
    }
    // exec
    pid_t e = fork();
    if (e == 0) {
      execl("/bin/true", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
    sh->exec_pid = e;
    // killed
    pid_t k = fork();
    if (k == 0) {
      pause();
      _exit(0);
    }
    sh->killed_pid = k;
    usleep(20'000);
    kill(k, SIGKILL);
    // a child that exits; its pid is then reused by an unrelated process
    pid_t c = fork();
    if (c == 0) {
      prctl(PR_SET_NAME, "st-old");
      for (int i = 0; i < kOldNaps; ++i) usleep(10'000);
      _exit(0);
    }
    int st;
    if (waitpid(e, &st, 0) != e || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 2;
    if (waitpid(k, &st, 0) != k || !WIFSIGNALED(st)) return 3;
    if (waitpid(c, &st, 0) != c) return 4;
    sh->old_pid = c;
    // stay traced while the unrelated process runs under the reused pid
    for (int i = 0; i < 3000 && !sh->reuse_done; ++i) usleep(10'000);
    return 0;
  });
  // The unrelated process: started by this (untraced) test process with the
  // exited child's pid (clone3 set_tid, >= 5.5), named and sleeping differently.
  int reuse_pid = 0, reuse_err = 0;
  std::thread reuser([&] {
    // 2000 threads take a while under software emulation (kernel matrix): wait long.
    for (int i = 0; i < 12000 && !sh->old_pid && !sh->reuse_done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pid_t want = sh->old_pid;
    if (!want) {
      reuse_err = ETIMEDOUT;
      return;
    }
    struct clone_args ca {};
    ca.exit_signal = SIGCHLD;
    ca.set_tid = reinterpret_cast<uint64_t>(&want);
    ca.set_tid_size = 1;
    long p = syscall(SYS_clone3, &ca, sizeof(ca));
    if (p == 0) {
      prctl(PR_SET_NAME, "st-reuse");
      usleep(1'000'000);
      _exit(0);
    }
    if (p < 0) reuse_err = errno;
    else {
      reuse_pid = static_cast<int>(p);
      waitpid(static_cast<pid_t>(p), nullptr, 0);
    }
    sh->reuse_done = 1;
  });
  auto r = trace_workload(w, attach_options(w.pid()));
  sh->reuse_done = 1;
  reuser.join();

  const auto& threads = r.analysis.threads.threads();
  size_t job_threads = 0;
  for (const auto& [tid, t] : threads)
    if (t.pid == static_cast<uint32_t>(w.pid()) && tid != static_cast<uint32_t>(w.pid())) ++job_threads;
  CHECK(job_threads >= static_cast<size_t>(kBatches * kPerBatch));
  CHECK(r.drops.total_dropped() == 0);
  CHECK(r.decode.bad_size == 0);

  const ThreadInfo* ex = r.analysis.threads.find(static_cast<uint32_t>(sh->exec_pid.load()));
  REQUIRE(ex != nullptr);
  CHECK(ex->comm == "true");
  CHECK(ex->exited);
  const ThreadInfo* killed = r.analysis.threads.find(static_cast<uint32_t>(sh->killed_pid.load()));
  REQUIRE(killed != nullptr);
  CHECK(killed->exited);

  const ThreadInfo* old = r.analysis.threads.find(static_cast<uint32_t>(sh->old_pid.load()));
  REQUIRE(old != nullptr);
  if (reuse_pid != sh->old_pid) {
    // clone3 set_tid: 5.5+. On an older kernel the rest cannot be forced.
    INFO("clone3(set_tid=" << sh->old_pid << ") failed: " << std::strerror(reuse_err));
    CHECK_FALSE(kernel_at_least(5, 5));
    std::printf("SKIPPED: pid reuse part: clone3 set_tid unavailable (%s)\n", std::strerror(reuse_err));
    return;
  }
  // The unrelated process under the same pid is not traced and not merged into the old one.
  CHECK(old->comm == "st-old");
  // Its own naps (7 x 10 ms), not the second the unrelated process slept under its pid.
  CHECK(old->ns(ThreadState::sleeping) >= (kOldNaps - 1) * 10'000'000ull);
  CHECK(old->ns(ThreadState::sleeping) < 600'000'000ull);
  for (const auto& [tid, t] : threads) CHECK(t.comm != "st-reuse");
}

TEST_CASE("faults: a ring-buffer storm is counted per class, marked incomplete, memory bounded",
          "[root][faults][drops]") {
  require_root();
  // A two-thread pipe ping-pong: every message is a wake-up and two switches
  // (~4 records), into a 1 MiB ring (~20k records) drained once a second.
  // No early wake-up at a quarter full (wake_pct 0): the ring must overflow.
  auto storm = [](int n, const char* wake_pct = "0") {
    return run({kBin, "run", "--ring-mib", "1", "--drain-ms", "1000", "--ring-wake-pct", wake_pct, "--json", "-", "--",
                PINGPONG_BIN, std::to_string(n)});
  };
  auto small = storm(20'000);
  auto big = storm(160'000);
  INFO(big.out.substr(0, 2000));
  REQUIRE(big.rc == 0);
  REQUIRE(small.rc == 0);
  auto j = json_of(big.out);
  CHECK(j["incomplete"] == true);
  uint64_t dropped = 0;
  for (const auto& [kind, v] : j["events"].items()) dropped += v["dropped"].get<uint64_t>();
  CHECK(dropped > 0);
  CHECK(j["events"]["sched_wakeup"]["dropped"].get<uint64_t>() + j["events"]["sched_switch"]["dropped"].get<uint64_t>() >
        0);
  // Memory: steptrace's peak RSS does not grow with the storm (8x the events).
  std::printf("storm: steptrace max RSS %ld KiB (20k round trips), %ld KiB (160k), %llu records dropped\n",
              small.maxrss_kib, big.maxrss_kib, static_cast<unsigned long long>(dropped));
  CHECK(big.maxrss_kib < small.maxrss_kib + 64 * 1024);
  CHECK(big.maxrss_kib < 512 * 1024);
  // The same storm with the default early wake-up: a record that finds the
  // ring a quarter full wakes the drain, whatever its timer says. Here 0.6 %
  // dropped against 93 % without it.
  auto woken = storm(160'000, "25");
  REQUIRE(woken.rc == 0);
  auto w = json_of(woken.out);
  uint64_t w_emitted = 0, w_dropped = 0;
  for (const auto& [kind, v] : w["events"].items()) {
    w_emitted += v["emitted"].get<uint64_t>();
    w_dropped += v["dropped"].get<uint64_t>();
  }
  std::printf("storm woken at 25 %%: %llu records kept, %llu dropped (without: %llu dropped)\n",
              static_cast<unsigned long long>(w_emitted), static_cast<unsigned long long>(w_dropped),
              static_cast<unsigned long long>(dropped));
  CHECK(w_dropped * 4 < dropped);
  CHECK(w_dropped < w_emitted);
}

// libbpf's ring_buffer__consume goes on while the producer keeps adding: a
// storm that outran the consumer kept a session inside one drain, deaf to
// SIGHUP and -d (a CI run of the SIGHUP record test hung for 600 s). One
// drain now stops at its bound and says more() is waiting; no record is lost
// between the drains.
TEST_CASE("faults: one ring drain stops at its bound during a storm, and the drains lose nothing",
          "[root][faults][drops]") {
  require_root();
  Workload storm([] { return std::system((std::string(PINGPONG_BIN) + " 400000").c_str()) == 0 ? 0 : 1; });
  TracerSettings ts;
  ts.subsystems = ST_SUB_SCHED;
  ts.ring_bytes = 4ull << 20;
  auto tracer = BpfTracer::create(ts, probe_features(""));
  REQUIRE(tracer.ok());
  uint64_t seen = 0;
  auto reader = RingReader::create((*tracer)->ring_map_fd(), ts.ring_bytes, [&](const void*, size_t) { ++seen; });
  REQUIRE(reader.ok());
  CHECK((*reader)->limit() == (4u << 20) / 32);  // a full ring of the smallest records
  (*reader)->set_limit(500);
  REQUIRE((*tracer)->add_target(static_cast<uint32_t>(storm.pid())).ok());
  storm.release();
  int cut_short = 0, drains = 0;
  while (!storm.exited()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto n = (*reader)->drain();
    REQUIRE(n.ok());
    CHECK(*n <= 500);
    ++drains;
    if ((*reader)->more()) {
      CHECK(*n == 500);
      ++cut_short;
    }
  }
  // The job is gone: drain what is left, each call still bounded.
  for (int i = 0; i < 100000; ++i) {
    auto n = (*reader)->drain();
    REQUIRE(n.ok());
    if (!(*reader)->more()) break;
  }
  CHECK_FALSE((*reader)->more());
  auto stats = (*tracer)->read_stats();
  REQUIRE(stats.ok());
  std::printf("bounded drain: %d of %d drains cut at 500 records; %llu records read, %llu emitted, %llu dropped\n",
              cut_short, drains, static_cast<unsigned long long>(seen),
              static_cast<unsigned long long>(stats->total_emitted()),
              static_cast<unsigned long long>(stats->total_dropped()));
  CHECK(cut_short > 0);
  CHECK(seen == stats->total_emitted());  // every record reserved was read: none lost at a bound
}

// The drain thread also folds the analysis' windows: on a busy job a fold
// (and the memory handed back after it) held it for a second or more, and a
// CI run dropped 12153 of 23 M records in three minutes of compute-bound.
// While it is away the ring keeper drains the ring into memory. Side by side
// on one storm and one small ring: the drain thread away for 3 s without the
// keeper loses records; away for 1.5 s with it none, and every record
// reserved is read. The ring is 8 MiB: since records got cheaper the storm
// writes ~350 k records/s, and a 1 MiB ring lasted 41 ms, less than the
// keeper thread once waited for a CPU under CI's parallel ASan pass (2436
// dropped); 8 MiB lasts ~330 ms, and 3 s of the storm still overflow it.
TEST_CASE("faults: while a fold holds the drain thread the ring keeper drains the ring and nothing is dropped",
          "[root][faults][drops]") {
  require_root();
  Workload storm([] { return ::execl(PINGPONG_BIN, PINGPONG_BIN, "100000000", static_cast<char*>(nullptr)); });
  TracerSettings ts;
  ts.subsystems = ST_SUB_SCHED;
  ts.ring_bytes = 8ull << 20;
  auto tracer = BpfTracer::create(ts, probe_features(""));
  REQUIRE(tracer.ok());
  uint64_t seen = 0;
  auto reader = RingReader::create((*tracer)->ring_map_fd(), ts.ring_bytes, [&](const void*, size_t) { ++seen; });
  REQUIRE(reader.ok());
  RingKeeper keeper(**reader, ts.ring_bytes, 512ull << 20, 10);
  REQUIRE((*tracer)->add_target(static_cast<uint32_t>(storm.pid())).ok());
  storm.release();
  auto drain_for = [&](int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      REQUIRE((*reader)->drain().ok());
      if (!(*reader)->more()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  auto dropped = [&] {
    auto st = (*tracer)->read_stats();
    REQUIRE(st.ok());
    return st->total_dropped();
  };
  drain_for(300);
  const uint64_t before = dropped();
  // Away without the keeper: the ring fills and the kernel drops.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  drain_for(300);
  const uint64_t unkept = dropped() - before;
  // Away with it.
  const uint64_t seen_before = seen;
  keeper.hold();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  keeper.release();
  const size_t kept = keeper.replay([&](const void*, size_t) { ++seen; });
  drain_for(300);
  const uint64_t kept_dropped = dropped() - before - unkept;
  ::kill(storm.pid(), SIGKILL);
  storm.wait();
  for (int i = 0; i < 1000; ++i) {
    REQUIRE((*reader)->drain().ok());
    if (!(*reader)->more()) break;
  }
  auto stats = (*tracer)->read_stats();
  REQUIRE(stats.ok());
  std::printf("ring keeper: 3 s away without it %llu records dropped; 1.5 s with it %zu records kept (%llu read in all "
              "while it held and after), %llu dropped, peak %llu bytes kept\n",
              static_cast<unsigned long long>(unkept), kept, static_cast<unsigned long long>(seen - seen_before),
              static_cast<unsigned long long>(kept_dropped),
              static_cast<unsigned long long>(keeper.stats().peak_bytes));
  CHECK(unkept > 0);  // the control: 3 s of this storm is more than the ring holds
  CHECK(kept_dropped == 0);
  CHECK(kept * 48 > ts.ring_bytes);  // more than one ring's worth went through the keeper
  CHECK(keeper.stats().holds == 1);
  CHECK(keeper.stats().records == kept);
  CHECK(seen == stats->total_emitted());  // every record reserved was read once
}

TEST_CASE("faults: two steptrace instances at once trace their own jobs independently", "[root][faults]") {
  require_root();
  Run a, b;
  std::thread ta([&] { a = run({kBin, "run", "--json", "-", "--", "/bin/sleep", "0.8"}); });
  std::thread tb([&] {
    b = run({kBin, "run", "--json", "-", "--", "/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=4k", "count=20000"});
  });
  ta.join();
  tb.join();
  INFO(a.out.substr(0, 500) << "\n----\n" << b.out.substr(0, 500));
  REQUIRE(a.rc == 0);
  REQUIRE(b.rc == 0);
  auto comms = [](const nlohmann::json& j) {
    std::set<std::string> s;
    for (const auto& t : j["threads"]) s.insert(t["comm"].get<std::string>());
    return s;
  };
  auto ca = comms(json_of(a.out)), cb = comms(json_of(b.out));
  CHECK(ca.count("sleep") == 1);
  CHECK(ca.count("dd") == 0);
  CHECK(cb.count("dd") == 1);
  CHECK(cb.count("sleep") == 0);
}

TEST_CASE("faults: a broken environment gets one clear line and a non-zero exit", "[root][faults]") {
  require_root();
  SECTION("missing BTF") {
    auto r = run({kBin, "run", "--btf", "/nonexistent/vmlinux", "--", "true"});
    CHECK(r.rc == 1);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.rfind("steptrace: error: btf: cannot read /nonexistent/vmlinux", 0) == 0);
    auto c = run({kBin, "check", "--btf", "/nonexistent/vmlinux"});
    CHECK(c.rc == 1);
    CHECK(c.out.find("tracing cannot work here") != std::string::npos);
  }
  SECTION("no privileges") {
    auto r = run({kBin, "run", "--", "true"}, /*drop_privileges=*/true);
    INFO(r.out);
    CHECK(r.rc == 1);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.rfind("steptrace: error: privileges: missing", 0) == 0);
  }
  SECTION("unknown --accel-dev") {
    auto r = run({kBin, "run", "--accel-dev", "/nonexistent-dir/neuron0", "--", "true"});
    CHECK(r.rc == 1);
    CHECK(r.out == "steptrace: error: unknown --accel-dev /nonexistent-dir/neuron0: no such file or directory\n");
  }
  SECTION("a pid that does not exist") {
    auto r = run({kBin, "attach", "-p", "999999999", "-d", "1"});
    CHECK(r.rc == 1);
    CHECK(r.out == "steptrace: error: no such process: 999999999\n");
  }
  SECTION("no tracefs") {
    // Unmounting tracefs on a shared host would break other tools: only in the
    // throwaway kernel-matrix guest (tools/kernel-matrix/guest-init.sh sets this).
    if (!getenv("STEPTRACE_KMATRIX_GUEST")) {
      std::printf("SKIPPED: no-tracefs fault: only in the kernel-matrix guest (cannot unmount safely here)\n");
      return;
    }
    umount2("/sys/kernel/debug/tracing", MNT_DETACH);
    umount2("/sys/kernel/debug", MNT_DETACH);
    REQUIRE(umount2("/sys/kernel/tracing", MNT_DETACH) == 0);
    auto c = run({kBin, "check"});
    auto r = run({kBin, "run", "--json", "-", "--", "true"});
    REQUIRE(mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0);
    REQUIRE(mount("debugfs", "/sys/kernel/debug", "debugfs", 0, nullptr) == 0);
    // Nothing steptrace needs lives in tracefs (tp_btf, kprobe PMU): it warns and
    // traces; only the neuron:* tracepoint tier is off, and says why.
    INFO(c.out);
    CHECK(c.rc == 0);
    CHECK(c.out.find("not mounted") != std::string::npos);
    INFO(r.out.substr(0, 1500));
    REQUIRE(r.rc == 0);
    auto j = json_of(r.out);
    CHECK(j["attach_tiers"]["accel_tp"] == "none (tracefs not mounted)");
  }
}

TEST_CASE("faults: kernel lockdown=confidentiality fails the preflight with the reason", "[faults]") {
  CHECK(parse_lockdown("none integrity [confidentiality]\n") == "confidentiality");
  CHECK(parse_lockdown("[none] integrity confidentiality") == "none");
  CHECK(parse_lockdown("garbage") == "");
  KernelFeatures f;
  f.btf = f.ringbuf = f.task_storage = f.tp_sys_enter = true;
  Capabilities caps;
  caps.sys_admin = true;
  CHECK(preflight_ok(run_preflight(f, caps, "integrity")));
  auto rows = run_preflight(f, caps, "confidentiality");
  CHECK_FALSE(preflight_ok(rows));
  bool found = false;
  for (const auto& r : rows)
    if (r.name == "lockdown") {
      found = true;
      CHECK(r.status == CheckStatus::fail);
      CHECK(r.hint.find("lockdown=integrity") != std::string::npos);
    }
  CHECK(found);
}
