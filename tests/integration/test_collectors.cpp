// SPDX-License-Identifier: Apache-2.0
// [root] Each collector against a real workload: load and attach the real
// programs, drive the kernel path, assert on what the tracer reports.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "neuron_uapi.h"
#include "export/summary.h"
#include "export/text_report.h"
#include "loader/features.h"
#include "pipeline/replay.h"
#include "support/workload.h"

using namespace steptrace;
using namespace steptrace::test;

namespace {

template <typename T>
T* shared_mem() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return new (p) T{};
}

pid_t gettid_() { return static_cast<pid_t>(syscall(SYS_gettid)); }

}  // namespace

TEST_CASE("sched: a sleeping thread woken by another records the waker and the blocked time", "[root][sched]") {
  require_root();
  struct Ids {
    pid_t sleeper, waker;
  };
  auto* ids = shared_mem<Ids>();
  constexpr int kRounds = 5;
  Workload w([ids] {
    int p[2];
    if (pipe(p) != 0) return 1;
    ids->sleeper = gettid_();
    std::thread t([&] {
      prctl(PR_SET_NAME, "st-waker");
      ids->waker = gettid_();
      for (int i = 0; i < kRounds; ++i) {
        usleep(20'000);
        char c = 1;
        if (write(p[1], &c, 1) != 1) _exit(2);
      }
    });
    for (int i = 0; i < kRounds; ++i) {
      char c;
      if (read(p[0], &c, 1) != 1) return 3;
    }
    t.join();
    return 0;
  });
  auto r = trace_workload(w, attach_options(w.pid()));
  const ThreadInfo* sleeper = r.analysis.threads.find(static_cast<uint32_t>(ids->sleeper));
  REQUIRE(sleeper != nullptr);
  auto it = sleeper->wakers.find(static_cast<uint32_t>(ids->waker));
  REQUIRE(it != sleeper->wakers.end());
  CHECK(it->second.count >= kRounds);
  CHECK(it->second.waker_comm == "st-waker");
  // Each round the sleeper waited ~20 ms for the waker.
  CHECK(it->second.blocked_ns >= kRounds * 15'000'000ull);
  CHECK(it->second.blocked_ns <= kRounds * 60'000'000ull);
  CHECK(sleeper->ns(ThreadState::sleeping) >= kRounds * 15'000'000ull);
  const ThreadInfo* waker = r.analysis.threads.find(static_cast<uint32_t>(ids->waker));
  REQUIRE(waker != nullptr);
  CHECK(waker->comm == "st-waker");
  CHECK(r.drops.total_dropped() == 0);
}

TEST_CASE("sched: sched_yield calls that give the CPU away are counted, a preempted spinner's are not",
          "[root][sched]") {
  require_root();
  Workload w([] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) return 3;
    // 1. Two SCHED_FIFO threads of one priority on one CPU, both yielding:
    //    each call puts the caller behind the other, so every one of main's
    //    2000 calls gives the CPU away, on any kernel (CFS and EEVDF keep a
    //    yielding SCHED_OTHER caller when the other thread is not due).
    sched_param fifo{};
    fifo.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) return 4;
    std::atomic<bool> stop{false}, started{false};
    std::thread partner([&] {  // inherits the CPU and the policy
      started = true;
      while (!stop.load()) sched_yield();
    });
    while (!started.load()) usleep(100);  // a nap, not a yield: main's count stays its loop's
    for (int i = 0; i < 2000; ++i) sched_yield();
    stop = true;
    partner.join();
    sched_param other{};
    if (sched_setscheduler(0, SCHED_OTHER, &other) != 0) return 5;
    // 2. A spinner that never yields, beside a thread that naps: each wake-up
    //    or tick takes the CPU from it on its way back to user space, a
    //    switch-out that leaves it runnable without the preempt flag.
    stop = false;
    std::thread spinner([&] {
      while (!stop.load()) {
      }
    });
    for (int i = 0; i < 200; ++i) usleep(1000);
    stop = true;
    spinner.join();
    return 0;
  });
  auto r = trace_workload(w, attach_options(w.pid()));
  REQUIRE(w.wait() == 0);
  const ThreadInfo* main = r.analysis.threads.find(static_cast<uint32_t>(w.pid()));
  REQUIRE(main != nullptr);
  // The partner's first call may find main not yet back in line (a
  // preemption by a kernel thread is flagged and not counted).
  CHECK(main->yields >= 1990);
  CHECK(main->yields <= 2000);
  CHECK(main->yields <= main->yield_switches);
  int others = 0;
  bool spinner_seen = false;
  for (const auto& [key, t] : r.analysis.threads.threads()) {
    if (t.pid != static_cast<uint32_t>(w.pid()) || t.tid == static_cast<uint32_t>(w.pid())) continue;
    ++others;
    if (t.yields >= 1900) continue;  // the partner
    spinner_seen = true;
    CHECK(t.yields == 0);
    CHECK(t.yield_switches == 0);
    CHECK(t.switches_in >= 50);  // it did leave the CPU (so its zero says something)
    CHECK(t.preempted >= 50);    // each time taken from it, flagged or not
  }
  CHECK(others == 2);
  CHECK(spinner_seen);
}

TEST_CASE("block: O_DIRECT reads are recorded with latency, bytes and the reading tid", "[root][block]") {
  require_root();
  std::string path = disk_tmpdir() + "/steptrace-odirect-" + std::to_string(getpid());
  constexpr size_t kChunk = 64 << 10, kChunks = 32;
  {
    int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    std::vector<char> buf(kChunk, 'x');
    for (size_t i = 0; i < kChunks; ++i) REQUIRE(write(fd, buf.data(), kChunk) == (ssize_t)kChunk);
    REQUIRE(fsync(fd) == 0);
    close(fd);
  }
  Workload w([&] {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) return 1;
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, kChunk) != 0) return 2;
    for (size_t i = 0; i < kChunks; ++i)
      if (pread(fd, buf, kChunk, static_cast<off_t>(i * kChunk)) != (ssize_t)kChunk) return 3;
    close(fd);
    return 0;
  });
  auto r = trace_workload(w, attach_options(w.pid()));
  unlink(path.c_str());
  uint64_t bytes = 0, count = 0, total_ns = 0;
  for (const auto& [k, a] : r.analysis.collectors.block) {
    if (k.tid == static_cast<uint32_t>(w.pid()) && !k.write) {
      bytes += a.bytes;
      count += a.count;
      total_ns += a.total_ns;
    }
  }
  CHECK(bytes == kChunk * kChunks);
  REQUIRE(count >= kChunks);
  CHECK(total_ns > 0);
  // Latency is plausible for a real device: above 1 us and below 1 s per request.
  CHECK(total_ns / count > 1'000);
  CHECK(total_ns / count < 1'000'000'000ull);
}

TEST_CASE("net: a loopback TCP transfer is recorded both ways with its 4-tuple", "[root][net]") {
  require_root();
  constexpr size_t kUp = 1 << 20, kDown = 256 << 10;
  struct Shared {
    uint16_t port;
  };
  auto* sh = shared_mem<Shared>();
  Workload w([sh] {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (sockaddr*)&a, sizeof(a)) != 0 || listen(ls, 1) != 0) return 1;
    socklen_t al = sizeof(a);
    getsockname(ls, (sockaddr*)&a, &al);
    sh->port = ntohs(a.sin_port);
    std::thread server([&] {
      int c = accept(ls, nullptr, nullptr);
      std::vector<char> buf(64 << 10);
      size_t got = 0;
      while (got < kUp) {
        ssize_t n = recv(c, buf.data(), buf.size(), 0);
        if (n <= 0) _exit(4);
        got += static_cast<size_t>(n);
      }
      std::vector<char> out(kDown, 'd');
      if (send(c, out.data(), out.size(), 0) != (ssize_t)kDown) _exit(5);
      close(c);
    });
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (sockaddr*)&a, sizeof(a)) != 0) return 2;
    std::vector<char> out(kUp, 'u');
    size_t sent = 0;
    while (sent < kUp) {
      ssize_t n = send(s, out.data() + sent, kUp - sent, 0);
      if (n <= 0) return 3;
      sent += static_cast<size_t>(n);
    }
    std::vector<char> in(64 << 10);
    size_t got = 0;
    while (got < kDown) {
      ssize_t n = recv(s, in.data(), in.size(), 0);
      if (n <= 0) return 6;
      got += static_cast<size_t>(n);
    }
    server.join();
    close(s);
    close(ls);
    return 0;
  });
  Options o = attach_options(w.pid());
  char dir[] = "/tmp/st-net.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  o.record_path = std::string(dir) + "/net.cap";
  auto r = trace_workload(w, o);
  uint64_t client_sent = 0, client_recv = 0, server_sent = 0, server_recv = 0;
  bool saw_loopback = false;
  for (const auto& [id, s] : r.analysis.collectors.socks) {
    if (s.tuple.dport == sh->port) {  // client side
      client_sent += s.send.bytes;
      client_recv += s.recv.bytes;
    } else if (s.tuple.sport == sh->port) {  // accepted side
      server_sent += s.send.bytes;
      server_recv += s.recv.bytes;
    }
    if (format_tuple(s.tuple).find("127.0.0.1") != std::string::npos) saw_loopback = true;
  }
  CHECK(saw_loopback);
  CHECK(client_sent == kUp);
  CHECK(server_recv == kUp);
  CHECK(server_sent == kDown);
  CHECK(client_recv == kDown);
  // Every socket closed or still open, none evicted: no loss is made up.
  CHECK(r.drops.losses[ST_LOSS_SOCK_EVICTED] == 0);
  CHECK_FALSE(r.incomplete());

  // The capture's stream marks (what a merge across hosts fits clocks on):
  // each direction's bytes as the calls moved them and, where the kernel has
  // tcp:tcp_probe, segments as they arrived, before the receive call that
  // returned them ended. Arrivals are recorded on sockets a target already
  // used (an accepted socket's first segments, before its first traced call,
  // are not), at most one a millisecond per socket.
  auto replayed = replay_capture(o.record_path, {}, {}, ReplayKeeps{.stream_marks = true});
  REQUIRE(replayed.ok());
  const auto& marks = replayed->analysis.streams.marks();
  CHECK(replayed->analysis.streams.stride() == 1);
  std::map<uint64_t, uint64_t> sent, read;
  std::map<uint64_t, uint32_t> stream_end;
  std::map<uint64_t, std::vector<const StreamMark*>> calls_by_flow, arrivals_by_flow;
  for (const auto& m : marks) {
    if (!m.arrival) (m.send ? sent : read)[m.flow] += m.bytes;
    if (m.arrival) arrivals_by_flow[m.flow].push_back(&m);
    else if (!m.send) calls_by_flow[m.flow].push_back(&m);
    if (m.send && (!stream_end.count(m.flow) || static_cast<int32_t>(m.seq_end - stream_end[m.flow]) > 0))
      stream_end[m.flow] = m.seq_end;
  }
  REQUIRE(sent.size() == 2);
  for (const auto& [flow, bytes] : sent) {
    INFO("flow " << flow << ": sent " << bytes << ", read " << read[flow] << ", "
                 << arrivals_by_flow[flow].size() << " arrivals");
    CHECK(read[flow] == bytes);
    if (!probe_features("").tp_tcp_probe) continue;
    auto arrivals = arrivals_by_flow[flow];
    REQUIRE(!arrivals.empty());
    std::sort(arrivals.begin(), arrivals.end(), [](const StreamMark* a, const StreamMark* b) { return a->end < b->end; });
    const uint32_t first_read = calls_by_flow[flow].front()->seq_end - calls_by_flow[flow].front()->bytes;
    size_t matched = 0;
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const StreamMark* a = arrivals[i];
      INFO("arrival " << i << ": bytes " << a->bytes << " ending at " << a->seq_end);
      CHECK(a->start == a->end);
      if (i) CHECK(a->end - arrivals[i - 1]->end >= 1'000'000);  // thinned per socket
      // Inside the stream: after the first byte read, at most its last.
      CHECK(static_cast<int32_t>(a->seq_end - a->bytes - first_read) >= 0);
      CHECK(static_cast<int32_t>(stream_end[flow] - a->seq_end) >= 0);
      // The receive call that returned the arrival's middle byte (not its
      // last: the call that reads the FIN counts it in copied_seq) ended
      // after the arrival.
      const uint32_t middle = a->seq_end - a->bytes + a->bytes / 2;
      for (const StreamMark* c : calls_by_flow[flow]) {
        const int32_t into = static_cast<int32_t>(middle - (c->seq_end - c->bytes));
        if (into < 0 || into >= static_cast<int32_t>(c->bytes)) continue;
        ++matched;
        CHECK(a->end <= c->end);
      }
    }
    CHECK(matched == arrivals.size());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST_CASE("net: sockets evicted from a full socket LRU are counted as a loss and mark the report INCOMPLETE (none with sk storage)",
          "[root][net][drops]") {
  require_root();
  // 24 loopback connections open at once (48 sockets with traffic, both
  // ends in the job) through an 8-entry socket map.
  constexpr int kConns = 24;
  constexpr uint32_t kMapEntries = 8;
  Workload w([] {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (sockaddr*)&a, sizeof(a)) != 0 || listen(ls, kConns) != 0) return 1;
    socklen_t al = sizeof(a);
    getsockname(ls, (sockaddr*)&a, &al);
    std::vector<int> cl, sv;
    for (int i = 0; i < kConns; ++i) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, (sockaddr*)&a, sizeof(a)) != 0) return 2;
      int c = accept(ls, nullptr, nullptr);
      if (c < 0) return 3;
      cl.push_back(s);
      sv.push_back(c);
    }
    char b = 'x';
    for (int i = 0; i < kConns; ++i) {
      if (send(cl[i], &b, 1, 0) != 1 || recv(sv[i], &b, 1, 0) != 1) return 4;
      if (send(sv[i], &b, 1, 0) != 1 || recv(cl[i], &b, 1, 0) != 1) return 5;
    }
    for (int i = 0; i < kConns; ++i) {
      close(cl[i]);
      close(sv[i]);
    }
    close(ls);
    return 0;
  });
  auto o = attach_options(w.pid());
  o.max_socks = kMapEntries;
  auto r = trace_workload(w, o);
  INFO(format_report_text(r, {false, 0}).substr(0, 3000));
  bool in_sk_storage = false;
  for (const auto& t : r.tiers)
    if (t.collector == "net") in_sk_storage = t.tier.find("socket owners in sk storage") != std::string::npos;
  if (in_sk_storage) {
    // Every net program is a tp_btf one here: each socket holds its owner in
    // its own storage, so the LRU's size bounds nothing. None is lost, and
    // every data socket's close (which ends in softirq on the passive side)
    // is attributed.
    CHECK(r.drops.losses[ST_LOSS_SOCK_EVICTED] == 0);
    CHECK_FALSE(r.incomplete());
    int closed = 0;
    for (const auto& [id, s] : r.analysis.collectors.socks)
      if (s.closed && s.send.bytes + s.recv.bytes > 0) ++closed;
    CHECK(closed == 2 * kConns);
    return;
  }
  // The LRU (the kprobe tier, 6.1): at most the map's entries can still be
  // there or have closed in it; the rest of the 2 x 24 + 1 sockets were
  // pushed out while open.
  CHECK(r.drops.losses[ST_LOSS_SOCK_EVICTED] >= 2 * kConns - 2 * kMapEntries);
  CHECK(r.drops.losses[ST_LOSS_SOCK_EVICTED] < 1000);  // a socket can be re-added and evicted again, not without bound
  CHECK(r.incomplete());
  CHECK(summary_json(r)["losses"]["sock_evicted"]["count"].get<uint64_t>() == r.drops.losses[ST_LOSS_SOCK_EVICTED]);
}

TEST_CASE("accel: ioctls on an --accel-dev file are recorded with cmd, bytes and result, others are not",
          "[root][accel]") {
  require_root();
  std::string dev = disk_tmpdir() + "/steptrace-fakedev-" + std::to_string(getpid());
  std::string other = dev + "-other";
  for (const auto& p : {dev, other}) {
    int fd = open(p.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    close(fd);
  }
  Workload w([&] {
    int fd = open(dev.c_str(), O_RDWR);
    int ofd = open(other.c_str(), O_RDWR);
    if (fd < 0 || ofd < 0) return 1;
    neuron_arg_mem_buf_copy64 copy{};
    copy.size = 12345;
    copy.copy_to_mem_handle = 1;
    ioctl(fd, NEURON_CMD_MEM_BUF_COPY64, &copy);  // a regular file answers ENOTTY: still traced
    neuron_arg_dma_queue_copy_start kick{};
    for (int i = 0; i < 3; ++i) ioctl(fd, NEURON_CMD_DMA_QUEUE_COPY_START, &kick);
    neuron_arg_dma_copy_descriptors64 desc{};
    desc.num_descs = 10;
    ioctl(fd, NEURON_CMD_DMA_COPY_DESCRIPTORS64, &desc);
    for (int i = 0; i < 5; ++i) ioctl(ofd, NEURON_CMD_MEM_BUF_COPY64, &copy);  // not an accel device
    struct termios t;
    ioctl(fd, TCGETS, &t);  // not a Neuron command
    close(fd);
    close(ofd);
    return 0;
  });
  auto o = attach_options(w.pid());
  o.accel_devs = {dev};
  auto r = trace_workload(w, o);
  unlink(dev.c_str());
  unlink(other.c_str());
  const auto& by = r.analysis.collectors.accel_by_cmd;
  REQUIRE(by.count(NEURON_CMD_MEM_BUF_COPY64) == 1);
  CHECK(by.at(NEURON_CMD_MEM_BUF_COPY64).agg.count == 1);
  CHECK(by.at(NEURON_CMD_MEM_BUF_COPY64).agg.bytes == 12345);
  CHECK(by.at(NEURON_CMD_MEM_BUF_COPY64).errors == 1);
  REQUIRE(by.count(NEURON_CMD_DMA_QUEUE_COPY_START) == 1);
  CHECK(by.at(NEURON_CMD_DMA_QUEUE_COPY_START).agg.count == 3);
  REQUIRE(by.count(NEURON_CMD_DMA_COPY_DESCRIPTORS64) == 1);
  CHECK(by.at(NEURON_CMD_DMA_COPY_DESCRIPTORS64).agg.bytes == 10 * NEURON_DMA_DESC_BYTES);
  CHECK(by.count(TCGETS) == 0);
  CHECK(by.size() == 3);
}
