// SPDX-License-Identifier: Apache-2.0
// [root] The traced job's lifecycle through the steptrace binary, with a real
// process tree: a launcher that starts two ranks which checkpoint on SIGTERM.
// A stop (the end of -d, SIGTERM or SIGINT to steptrace) must reach both
// ranks, leave no process of the tree behind, and steptrace must exit with
// the launcher's status. `attach -p <launcher>` must follow the ranks that
// already run.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/shell.h"
#include "support/workload.h"

namespace fs = std::filesystem;

namespace {

const std::string kBin = STEPTRACE_BIN;

// The launcher: two ranks in the background (a non-interactive shell starts
// them with SIGINT ignored, as many real launchers' children are), each
// writing its pid, then a checkpoint file when SIGTERM arrives. `trap_term`
// false: the ranks ignore SIGTERM too (only SIGKILL ends them).
std::string write_launcher(const fs::path& dir, bool trap_term = true) {
  const std::string on_term = trap_term ? "echo ckpt > " + dir.string() + "/rank$r.ckpt; exit 0" : "";
  std::ofstream f(dir / "launcher.sh");
  f << "#!/bin/bash\n"
    << "for r in 0 1; do\n"
    << "  bash -c \"trap '" << on_term << "' TERM; echo \\$\\$ > " << dir.string()
    << "/rank$r.pid; while true; do sleep 0.02; done\" &\n"
    << "done\n"
    << "wait\n";
  f.close();
  fs::permissions(dir / "launcher.sh", fs::perms::owner_all);
  return (dir / "launcher.sh").string();
}

fs::path temp_dir() {
  char tmpl[] = "/tmp/steptrace-lifecycle.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// `policy`: the scheduling policy steptrace is started under (-1: the test's).
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out, int policy = -1) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (policy >= 0) {
      sched_param p{};
      if (::sched_setscheduler(0, policy, &p) != 0) _exit(126);
    }
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setpgid(0, 0);  // not in the test runner's group: only what we send reaches it
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    _exit(127);
  }
  return pid;
}

// Exit code (128+N for a signal) of a child, waiting at most `timeout_s`.
int wait_exit(pid_t pid, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      FAIL("steptrace did not exit within " << timeout_s << " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::vector<pid_t> rank_pids(const fs::path& dir, double timeout_s = 20) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::vector<pid_t> pids;
    for (int r = 0; r < 2; ++r) {
      std::ifstream f(dir / ("rank" + std::to_string(r) + ".pid"));
      pid_t p = 0;
      if (f >> p && p > 0) pids.push_back(p);
    }
    if (pids.size() == 2) return pids;
    if (std::chrono::steady_clock::now() > end) FAIL("the ranks did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool alive(pid_t p) {
  // A zombie is not alive; /proc/PID/stat's state tells.
  std::ifstream f("/proc/" + std::to_string(p) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto c = s.rfind(')');
  return c != std::string::npos && c + 2 < s.size() && s[c + 2] != 'Z' && s[c + 2] != 'X';
}

std::string slurp(const fs::path& p) { return steptrace::test::slurp(p.string()); }

void check_ranks_checkpointed_and_gone(const fs::path& dir, const std::vector<pid_t>& ranks) {
  CHECK(fs::exists(dir / "rank0.ckpt"));
  CHECK(fs::exists(dir / "rank1.ckpt"));
  for (pid_t p : ranks) CHECK_FALSE(alive(p));
}

}  // namespace

TEST_CASE("lifecycle: the end of -d stops the job's whole tree with SIGTERM, and the exit status is the job's",
          "[root][lifecycle]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  auto launcher = write_launcher(dir);
  pid_t st = spawn({kBin, "run", "--collectors", "sched", "-d", "2", "--json", (dir / "r.json").string(), "--",
                    launcher},
                   dir / "out.txt");
  auto ranks = rank_pids(dir);
  int rc = wait_exit(st, 30);
  INFO(slurp(dir / "out.txt"));
  CHECK(rc == 128 + SIGTERM);  // bash, waiting, is ended by SIGTERM: that is the job's status
  check_ranks_checkpointed_and_gone(dir, ranks);
  auto json = slurp(dir / "r.json");
  CHECK(json.find("\"end_reason\": \"duration\"") != std::string::npos);
  CHECK(json.find("killed by SIGTERM (after the stop request)") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("lifecycle: SIGTERM and SIGINT to steptrace reach every rank, nothing of the tree survives",
          "[root][lifecycle]") {
  steptrace::test::require_root();
  for (int sig : {SIGTERM, SIGINT}) {
    DYNAMIC_SECTION("signal " << sig) {
      auto dir = temp_dir();
      auto launcher = write_launcher(dir);
      pid_t st = spawn({kBin, "run", "--collectors", "sched", "--", launcher}, dir / "out.txt");
      auto ranks = rank_pids(dir);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::kill(st, sig);
      int rc = wait_exit(st, 30);
      auto out = slurp(dir / "out.txt");
      INFO(out);
      // The launcher (bash in `wait`) dies of the forwarded signal; the ranks,
      // which ignore SIGINT as background jobs, get SIGTERM once it is gone.
      CHECK(rc == 128 + sig);
      check_ranks_checkpointed_and_gone(dir, ranks);
      CHECK(out.find("tracing ended: signal SIG") != std::string::npos);
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("lifecycle: ranks that ignore SIGTERM get SIGKILL after --kill-after", "[root][lifecycle]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  auto launcher = write_launcher(dir, /*trap_term=*/false);
  // The ranks trap SIGTERM with an empty handler: only SIGKILL ends them.
  pid_t st = spawn({kBin, "run", "--collectors", "sched", "-d", "1", "--kill-after", "1", "--", launcher},
                   dir / "out.txt");
  auto ranks = rank_pids(dir);
  auto t0 = std::chrono::steady_clock::now();
  int rc = wait_exit(st, 30);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto out = slurp(dir / "out.txt");
  INFO(out);
  CHECK(rc == 128 + SIGTERM);
  CHECK(took >= 1.5);  // -d 1 + the 1 s grace
  for (pid_t p : ranks) CHECK_FALSE(alive(p));
  CHECK(out.find("SIGKILL to its process tree") != std::string::npos);
  CHECK(out.find("SIGKILL after the 1.0 s grace period") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("lifecycle: --keep-running ends tracing and leaves the job running", "[root][lifecycle]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  auto launcher = write_launcher(dir);
  pid_t st = spawn({kBin, "run", "--collectors", "sched", "-d", "1", "--keep-running", "--", launcher},
                   dir / "out.txt");
  auto ranks = rank_pids(dir);
  int rc = wait_exit(st, 30);
  auto out = slurp(dir / "out.txt");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("left running (--keep-running)") != std::string::npos);
  for (pid_t p : ranks) CHECK(alive(p));
  CHECK_FALSE(fs::exists(dir / "rank0.ckpt"));
  for (pid_t p : ranks) ::kill(p, SIGKILL);
  fs::remove_all(dir);
}

// steptrace's threads run as SCHED_BATCH (a drain's wake-up never preempts a
// rank); the job it launches runs under the policy steptrace was started
// with; --sched normal, and a policy chosen with chrt, are kept.
TEST_CASE("lifecycle: steptrace runs as SCHED_BATCH and the job under the policy steptrace was started with",
          "[root][lifecycle]") {
  steptrace::test::require_root();
  struct Case {
    const char* name;
    std::vector<std::string> flags;
    int start_policy, tracer_policy, job_policy;
  };
  const std::vector<Case> cases = {{"default", {}, SCHED_OTHER, SCHED_BATCH, SCHED_OTHER},
                                   {"--sched normal", {"--sched", "normal"}, SCHED_OTHER, SCHED_OTHER, SCHED_OTHER},
                                   {"started under SCHED_IDLE", {}, SCHED_IDLE, SCHED_IDLE, SCHED_IDLE}};
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      auto dir = temp_dir();
      auto launcher = write_launcher(dir);
      // sample: a second thread (the symbol worker) is started after the policy is set.
      std::vector<std::string> argv = {kBin, "run", "--collectors", "sched,sample", "-d", "2"};
      argv.insert(argv.end(), c.flags.begin(), c.flags.end());
      argv.insert(argv.end(), {"--", launcher});
      pid_t st = spawn(argv, dir / "out.txt", c.start_policy);
      auto ranks = rank_pids(dir);
      int threads = 0;
      for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(st) + "/task")) {
        const pid_t tid = std::stoi(t.path().filename().string());
        const int policy = ::sched_getscheduler(tid);
        if (policy < 0) continue;  // gone meanwhile
        ++threads;
        INFO("steptrace thread " << tid);
        CHECK((policy & ~SCHED_RESET_ON_FORK) == c.tracer_policy);
      }
      CHECK(threads >= 2);
      for (pid_t r : ranks) {
        INFO("rank " << r);
        CHECK((::sched_getscheduler(r) & ~SCHED_RESET_ON_FORK) == c.job_policy);
      }
      int rc = wait_exit(st, 30);
      INFO(slurp(dir / "out.txt"));
      CHECK(rc == 128 + SIGTERM);  // the end of -d, as above
      fs::remove_all(dir);
    }
  }
}

#ifdef TRAINSIM_BIN
TEST_CASE("lifecycle: attach -p <launcher> follows the ranks it already started and reports their steps",
          "[root][lifecycle]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  const auto dev = dir / "dev";
  fs::create_directories(dev);
  pid_t sim = spawn({TRAINSIM_BIN, "--scenario", "compute-bound", "--ranks", "2", "--dev-dir", dev.string(),
                     "--duration", "10"},
                    dir / "sim.txt");
  // Attach once both ranks run (their device files exist and steps are under way).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  // Only the collectors the steps come from: this test is about which
  // processes are followed, and the analysis of every scheduler event of a
  // busy 2-rank job is slow under the sanitizers.
  pid_t st = spawn({kBin, "attach", "-p", std::to_string(sim), "-d", "3", "--collectors", "accel,uprobe",
                    "--accel-dev", (dev / "neuron0").string(),
                    "--accel-dev", (dev / "neuron1").string(), "--json", (dir / "r.json").string()},
                   dir / "out.txt");
  int rc = wait_exit(st, 120);
  auto out = slurp(dir / "out.txt");
  INFO(out << slurp(dir / "sim.txt"));
  CHECK(rc == 0);
  CHECK(wait_exit(sim, 60) == 0);  // attach stops tracing only: the job ran to its end
  CHECK(out.find("no training steps found") == std::string::npos);
  // Both ranks, each with its steps from the runtime probes (~50 ms steps, 3 s).
  auto j = nlohmann::json::parse(slurp(dir / "r.json"));
  const auto& ranks = j["job"]["ranks"];
  REQUIRE(ranks.size() == 2);
  for (const auto& r : ranks) {
    CHECK(r["step_source"].get<std::string>().find("runtime probes") == 0);
    CHECK(r["steps"].size() >= 20);
    CHECK(r["pid"].get<int>() != sim);  // the ranks, not the launcher
  }
  fs::remove_all(dir);
}
#endif

TEST_CASE("lifecycle: attach -p ends when every traced process has exited, an unreaped zombie included",
          "[root][lifecycle]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  // The target's parent (this test) does not reap it until steptrace is
  // done: its /proc entry stays, as a zombie, after it exits.
  pid_t job = spawn({"/bin/sh", "-c", "sleep 2"}, dir / "job.txt");
  const auto t0 = std::chrono::steady_clock::now();
  pid_t st = spawn({kBin, "attach", "-p", std::to_string(job), "-d", "60", "--collectors", "sched"}, dir / "out.txt");
  int rc = wait_exit(st, 50);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto out = slurp(dir / "out.txt");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("tracing ended: every traced process exited") != std::string::npos);
  CHECK(secs < 30);  // not the 60 s of -d
  CHECK(wait_exit(job, 5) == 0);
  fs::remove_all(dir);
}
