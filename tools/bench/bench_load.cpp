// SPDX-License-Identifier: Apache-2.0
// bench-load: the workloads of the steptrace benchmark suite (tools/bench).
//
// Each mode runs a fixed amount of work, times only that work (start-up,
// forks and the tracer's attach are outside the timed window) and writes one
// JSON object to --out FILE (stdout when absent), so the same binary can run
// bare or under `steptrace run` (whose report also goes to stdout).
//
//   pingpong  two threads pinned to one CPU bounce a byte over two pipes (B1, B4)
//   ioctl     ioctls with a Neuron command on --dev FILE (ENOTTY on a regular file) (B2, B5)
//   getppid   the cheapest syscall, a non-target tax probe (B2, B4)
//   odirect   4 KiB O_DIRECT preads at random offsets of --file (B3)
//   tcp       64-byte request/response over loopback TCP, client and server threads (B3)
//   hackbench groups of 10 sender and 10 receiver processes over socketpairs (B6)
//   idle      sleep (a target that produces nothing, for B4 and B9)
//
// --gate: read one byte from stdin before the timed loop, so a harness can
// attach a tracer to an already running process and only then start the work.
// --warmup N (ioctl): after the gate, N untimed calls, then "warm" on stdout
// and a second gate byte before the timed loop, so a harness can measure the
// tracer's steady state apart from its start-up (first-touch memory, first fold).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
  std::string mode;
  long iters = 100000;
  int threads = 1;
  int cpu = 0;
  int groups = 2;
  double seconds = 1;
  std::string dev, file, out;
  bool gate = false;
  long warmup = 0;
};

uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// CPU time of this process (all threads) plus its waited-for children: on a
// shared VM the wall clock also counts time other tasks held the CPU.
uint64_t g_cpu0 = 0;
uint64_t cpu_now_ns() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  uint64_t kids = (uint64_t(ru.ru_utime.tv_sec) + uint64_t(ru.ru_stime.tv_sec)) * 1000000000ull +
                  (uint64_t(ru.ru_utime.tv_usec) + uint64_t(ru.ru_stime.tv_usec)) * 1000ull;
  return clock_ns(CLOCK_PROCESS_CPUTIME_ID) + kids;
}

uint64_t now_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}

// Marks the start of the timed window (also the CPU-time baseline).
uint64_t start_ns() {
  g_cpu0 = cpu_now_ns();
  return now_ns();
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench-load: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) die("sched_setaffinity");
}

void wait_gate(const Args& a) {
  if (!a.gate) return;
  char c;
  while (read(0, &c, 1) < 0 && errno == EINTR) {
  }
}

void full_write(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      die("write");
    }
    c += w;
    n -= size_t(w);
  }
}

bool full_read(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      die("read");
    }
    if (r == 0) return false;
    c += r;
    n -= size_t(r);
  }
  return true;
}

// Returns ops done and the timed window.
struct Result {
  uint64_t ops = 0;
  uint64_t ns = 0;
  std::string extra;  // additional JSON members, comma-prefixed
};

Result run_pingpong(const Args& a) {
  int ab[2], ba[2];
  if (pipe(ab) || pipe(ba)) die("pipe");
  std::thread peer([&] {
    pin_self(a.cpu);
    char c;
    for (long i = 0; i < a.iters; ++i) {
      if (!full_read(ab[0], &c, 1)) return;
      full_write(ba[1], &c, 1);
    }
  });
  pin_self(a.cpu);
  wait_gate(a);
  char c = 'x';
  uint64_t t0 = start_ns();
  for (long i = 0; i < a.iters; ++i) {
    full_write(ab[1], &c, 1);
    full_read(ba[0], &c, 1);
  }
  uint64_t t1 = now_ns();
  peer.join();
  return {uint64_t(a.iters), t1 - t0, ""};
}

// A Neuron command (magic 'N') that carries no byte count: the tracer matches
// the fd, records enter/exit and reads nothing from the argument.
constexpr unsigned long kNeuronAck = 0x80084e24;  // NEURON_CMD_DMA_ACK_COMPLETED

Result run_ioctl(const Args& a) {
  if (a.dev.empty()) {
    errno = EINVAL;
    die("ioctl needs --dev FILE");
  }
  int fd = open(a.dev.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("open --dev");
  wait_gate(a);
  std::atomic<uint64_t> errs{0};
  auto body = [&](long n) {
    uint64_t arg[8] = {};
    uint64_t e = 0;
    for (long i = 0; i < n; ++i)
      if (ioctl(fd, kNeuronAck, arg) != 0) ++e;
    errs += e;
  };
  if (a.warmup > 0) {
    body(a.warmup);
    std::fputs("warm\n", stdout);
    std::fflush(stdout);
    wait_gate(a);
  }
  uint64_t t0 = start_ns();
  std::vector<std::thread> ts;
  for (int t = 1; t < a.threads; ++t) ts.emplace_back(body, a.iters);
  body(a.iters);
  for (auto& t : ts) t.join();
  uint64_t t1 = now_ns();
  close(fd);
  uint64_t ops = uint64_t(a.iters) * uint64_t(a.threads);
  return {ops, t1 - t0, ",\"ioctl_errors\":" + std::to_string(errs.load())};
}

Result run_getppid(const Args& a) {
  wait_gate(a);
  uint64_t t0 = start_ns();
  for (long i = 0; i < a.iters; ++i) (void)syscall(SYS_getppid);
  uint64_t t1 = now_ns();
  return {uint64_t(a.iters), t1 - t0, ""};
}

Result run_odirect(const Args& a) {
  constexpr size_t kBs = 4096;
  constexpr off_t kSize = 64ll << 20;
  if (a.file.empty()) {
    errno = EINVAL;
    die("odirect needs --file PATH");
  }
  struct stat st {};
  if (stat(a.file.c_str(), &st) != 0 || st.st_size < kSize) {
    int fd = open(a.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("create --file");
    std::vector<char> buf(1 << 20, 'd');
    for (off_t o = 0; o < kSize; o += off_t(buf.size())) full_write(fd, buf.data(), buf.size());
    fsync(fd);
    close(fd);
  }
  int fd = open(a.file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) die("open O_DIRECT");
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, kBs)) die("posix_memalign");
  uint64_t x = 88172645463325252ull;
  wait_gate(a);
  uint64_t t0 = start_ns();
  for (long i = 0; i < a.iters; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    off_t off = off_t(x % uint64_t(kSize / kBs)) * off_t(kBs);
    if (pread(fd, buf, kBs, off) != ssize_t(kBs)) die("pread");
  }
  uint64_t t1 = now_ns();
  free(buf);
  close(fd);
  return {uint64_t(a.iters), t1 - t0, ""};
}

Result run_tcp(const Args& a) {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) die("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) || listen(ls, 1)) die("bind/listen");
  socklen_t sl = sizeof(sa);
  getsockname(ls, reinterpret_cast<sockaddr*>(&sa), &sl);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof(sa))) die("connect");
  int s = accept(ls, nullptr, nullptr);
  if (s < 0) die("accept");
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::thread server([&] {
    char m[64];
    for (long i = 0; i < a.iters; ++i) {
      if (!full_read(s, m, sizeof(m))) return;
      full_write(s, m, sizeof(m));
    }
  });
  wait_gate(a);
  char m[64] = {};
  uint64_t t0 = start_ns();
  for (long i = 0; i < a.iters; ++i) {
    full_write(c, m, sizeof(m));
    full_read(c, m, sizeof(m));
  }
  uint64_t t1 = now_ns();
  server.join();
  close(c);
  close(s);
  close(ls);
  return {uint64_t(a.iters), t1 - t0, ""};
}

// hackbench (process mode, socketpairs): each group has 10 receivers and 10
// senders; every sender writes `iters` 100-byte messages to every receiver.
Result run_hackbench(const Args& a) {
  constexpr int kFan = 10;
  constexpr size_t kMsg = 100;
  int start_pipe[2];
  if (pipe(start_pipe)) die("pipe");
  std::vector<pid_t> kids;
  for (int g = 0; g < a.groups; ++g) {
    int fds[kFan][2];
    for (int r = 0; r < kFan; ++r) {
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[r])) die("socketpair");
      pid_t p = fork();
      if (p < 0) die("fork");
      if (p == 0) {
        close(start_pipe[1]);
        close(fds[r][1]);
        char buf[kMsg];
        for (long i = 0; i < long(kFan) * a.iters; ++i)
          if (!full_read(fds[r][0], buf, kMsg)) _exit(1);
        _exit(0);
      }
      kids.push_back(p);
      close(fds[r][0]);
    }
    for (int sdr = 0; sdr < kFan; ++sdr) {
      pid_t p = fork();
      if (p < 0) die("fork");
      if (p == 0) {
        close(start_pipe[1]);
        char c;
        if (read(start_pipe[0], &c, 1) < 0) _exit(1);  // EOF = start
        char buf[kMsg] = {};
        for (long i = 0; i < a.iters; ++i)
          for (int r = 0; r < kFan; ++r) full_write(fds[r][1], buf, kMsg);
        _exit(0);
      }
      kids.push_back(p);
    }
    for (int r = 0; r < kFan; ++r) close(fds[r][1]);
  }
  close(start_pipe[0]);
  wait_gate(a);
  uint64_t t0 = start_ns();
  close(start_pipe[1]);
  int bad = 0;
  for (pid_t p : kids) {
    int st = 0;
    if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ++bad;
  }
  uint64_t t1 = now_ns();
  uint64_t msgs = uint64_t(a.groups) * kFan * kFan * uint64_t(a.iters);
  return {msgs, t1 - t0, ",\"failed_children\":" + std::to_string(bad)};
}

Result run_idle(const Args& a) {
  wait_gate(a);
  uint64_t t0 = start_ns();
  timespec ts{time_t(a.seconds), long((a.seconds - double(time_t(a.seconds))) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return {0, now_ns() - t0, ""};
}

void usage() {
  std::fprintf(stderr,
               "usage: bench-load MODE [--iters N] [--threads T] [--cpu C] [--groups G] [--seconds S]\n"
               "                  [--dev FILE] [--file PATH] [--gate] [--warmup N] [--out FILE]\n"
               "modes: pingpong ioctl getppid odirect tcp hackbench idle\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (k == "--iters") a.iters = std::atol(val().c_str());
    else if (k == "--threads") a.threads = std::atoi(val().c_str());
    else if (k == "--cpu") a.cpu = std::atoi(val().c_str());
    else if (k == "--groups") a.groups = std::atoi(val().c_str());
    else if (k == "--seconds") a.seconds = std::atof(val().c_str());
    else if (k == "--dev") a.dev = val();
    else if (k == "--file") a.file = val();
    else if (k == "--out") a.out = val();
    else if (k == "--gate") a.gate = true;
    else if (k == "--warmup") a.warmup = std::atol(val().c_str());
    else usage();
  }
  if (a.iters <= 0 || a.threads <= 0 || a.groups <= 0) usage();
  signal(SIGPIPE, SIG_IGN);

  Result r;
  uint64_t cpu_end = 0;
  if (a.mode == "pingpong") r = run_pingpong(a);
  else if (a.mode == "ioctl") r = run_ioctl(a);
  else if (a.mode == "getppid") r = run_getppid(a);
  else if (a.mode == "odirect") r = run_odirect(a);
  else if (a.mode == "tcp") r = run_tcp(a);
  else if (a.mode == "hackbench") r = run_hackbench(a);
  else if (a.mode == "idle") r = run_idle(a);
  else usage();
  cpu_end = cpu_now_ns();
  uint64_t cpu = cpu_end - g_cpu0;

  char line[640];
  std::snprintf(line, sizeof(line),
                "{\"mode\":\"%s\",\"pid\":%d,\"ops\":%llu,\"ns\":%llu,\"ns_per_op\":%.3f,"
                "\"cpu_ns\":%llu,\"cpu_ns_per_op\":%.3f%s}\n",
                a.mode.c_str(), int(getpid()), static_cast<unsigned long long>(r.ops),
                static_cast<unsigned long long>(r.ns), r.ops ? double(r.ns) / double(r.ops) : 0.0,
                static_cast<unsigned long long>(cpu), r.ops ? double(cpu) / double(r.ops) : 0.0, r.extra.c_str());
  if (a.out.empty()) {
    std::fputs(line, stdout);
  } else {
    FILE* f = std::fopen(a.out.c_str(), "w");
    if (!f) die("open --out");
    std::fputs(line, f);
    std::fclose(f);
  }
  return 0;
}
