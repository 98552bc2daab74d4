// SPDX-License-Identifier: Apache-2.0
// Device counter readers against fake trees: NDS layout and decoding, the
// "NDS unavailable" paths, EFA and Neuron sysfs parsing.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "signals/counters.h"
#include "signals/device_signals.h"
#include "signals/numa_topology.h"
#include "signals/sampler_thread.h"

using namespace steptrace::signals;
namespace fs = std::filesystem;

namespace {
std::string temp_dir() {
  char t[] = "/tmp/st-signals.XXXXXX";
  REQUIRE(mkdtemp(t) != nullptr);
  return t;
}
void put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}
}  // namespace

TEST_CASE("nds: counter offsets follow the driver layout (device-counters.md worked table)", "[signals]") {
  CHECK(nds_nc_offset(0, kNcTimeInUse) == 0x100);
  CHECK(nds_nc_offset(1, kNcTimeInUse) == 0x1F8);
  CHECK(nds_nc_offset(3, kNcTimeInUse) == 0x3E8);
  CHECK(nds_nc_offset(4, kNcTimeInUse) == 0xE280);
  CHECK(nds_nc_offset(7, kNcTimeInUse) == 0xEB80);
  CHECK(nds_nc_offset(0, kNcLatencyDevice) == 0x168);
  CHECK(nds_nc_offset(2, kNcLatencyTotal) == 0x360);
  CHECK(nds_nc_offset(0, kNcTime) == 0x178);
  CHECK(nds_nc_offset(1, kNcCcTime) == 0x2A0);
  CHECK(nds_nc_offset(7, kNcCcTime) == 0xEC28);
  CHECK(nds_nc_offset(3, kNcInferenceCount) == 0x4C8);
  CHECK(nds_nc_offset(4, kNcMacCount) == 0xE368);
  // EXT band for NCs 0-3: counter 31 of NC0 starts the band.
  CHECK(nds_nc_offset(0, kNcHwErrCollectives) == 55936);
  CHECK(nds_nc_offset(15, 94) + 8 <= kNdsRequiredBytes);
}

TEST_CASE("nds: latency words decode as double seconds or integer microseconds", "[signals]") {
  double s = 0.0425;
  uint64_t bits;
  std::memcpy(&bits, &s, sizeof(bits));
  CHECK(nds_decode_seconds(bits) == Approx(0.0425));
  CHECK(nds_decode_seconds(42500) == Approx(0.0425));  // integer us
  CHECK(nds_decode_seconds(0) == 0);
}

TEST_CASE("nds: a slab is read with its sequence number", "[signals]") {
  std::vector<uint8_t> slab(kNdsSlabBytes, 0);
  std::memcpy(slab.data(), "nds", 4);
  auto put64 = [&](int nc, int k, uint64_t v) { std::memcpy(slab.data() + nds_nc_offset(nc, k), &v, 8); };
  auto sec = [](double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
  };
  put64(1, kNcInferenceCount, 7);
  put64(1, kNcInferCompleted, 6);
  put64(1, kNcInferTimedOut, 1);
  put64(1, kNcLatencyDevice, sec(0.05));
  put64(1, kNcTime, sec(0.03));
  put64(1, kNcCcTime, sec(0.02));
  CHECK(nds_header_ok(slab.data(), slab.size()));
  auto s = nds_read_nc(slab.data(), slab.size(), 1);
  CHECK(s.inference_count == 7);
  CHECK(s.completed == 6);
  CHECK(s.timeouts == 1);
  CHECK(s.compute_s == Approx(0.03));
  CHECK(s.cc_s == Approx(0.02));
  CHECK(s.device_s == Approx(0.05));
  CHECK(nds_read_nc(slab.data(), slab.size(), 0).inference_count == 0);
}

TEST_CASE("nds: unavailable datastores are detected and explained", "[signals]") {
  std::string dir = temp_dir();
  SECTION("no device under the root") {
    DeviceSignals ds(SignalsConfig{true, dir + "/sys", dir + "/dev"});
    ds.tick(1, {static_cast<uint32_t>(getpid())});
    auto d = ds.take();
    CHECK(d.pid_device.empty());
    CHECK(d.nds_problem.find("no Neuron device") != std::string::npos);
  }
  SECTION("a device file whose driver has no ACQUIRE_NEURON_DS (old driver)") {
    put(dir + "/dev/neuron0", "");  // a regular file: every ioctl is ENOTTY
    NdsView v;
    int err = 0;
    CHECK(v.open(dir + "/dev/neuron0", static_cast<uint32_t>(getpid()), &err) == NdsError::unsupported);
    CHECK(err == ENOTTY);
    CHECK_FALSE(v.ok());
    DeviceSignals ds(SignalsConfig{true, dir + "/sys", dir + "/dev"});
    REQUIRE(ds.data().devices.size() == 1);
    ds.tick(1, {static_cast<uint32_t>(getpid())});
    auto d = ds.take();
    CHECK(d.pid_device.empty());
    CHECK(d.nds_problem.find("old driver") != std::string::npos);
  }
  SECTION("a device that cannot be opened") {
    CHECK(NdsView().open(dir + "/dev/neuron9", 1) == NdsError::no_device);
  }
  fs::remove_all(dir);
}

TEST_CASE("efa: ports, rate and counters are read from a fake sysfs tree", "[signals]") {
  std::string dir = temp_dir();
  std::string p1 = dir + "/class/infiniband/efa_1/ports/1";
  put(p1 + "/rate", "100 Gb/sec (4X EDR)\n");
  put(p1 + "/hw_counters/tx_bytes", "12345\n");
  put(p1 + "/hw_counters/rdma_write_bytes", "77\n");
  std::string p0 = dir + "/class/infiniband/efa_0/ports/1";
  put(p0 + "/rate", "3.2 Gb/sec (1X)\n");
  put(p0 + "/hw_counters/rx_bytes", "5\n");
  put(dir + "/class/infiniband/mlx5_0/ports/1/hw_counters/tx_bytes", "1\n");  // not EFA
  auto ports = find_efa_ports(dir);
  REQUIRE(ports.size() == 2);
  CHECK(ports[0].name == "efa_0");
  CHECK(ports[0].rate_gbit == Approx(3.2));
  CHECK(ports[1].rate_gbit == Approx(100));
  auto c = read_efa_counters(ports[1]);
  CHECK(c.at("tx_bytes") == 12345);
  CHECK(c.at("rdma_write_bytes") == 77);
  CHECK(c.count("rx_bytes") == 0);
  CHECK(parse_ib_rate_gbit("400 Gb/sec (4X NDR)").value() == Approx(400));
  CHECK_FALSE(parse_ib_rate_gbit("fast").has_value());
  fs::remove_all(dir);
}

TEST_CASE("neuron sysfs: status and memory counters of every core", "[signals]") {
  std::string dir = temp_dir();
  std::string nd = neuron_sysfs_dir(dir, 3);
  put(nd + "/neuron_core0/stats/status/timeout/total", "2\n");
  put(nd + "/neuron_core1/stats/status/success/total", "40\n");
  put(nd + "/neuron_core1/stats/memory_usage/device_mem/tensors/total", "4096\n");
  put(nd + "/stats/memory_usage/host_mem/tensors/total", "8\n");
  auto m = read_neuron_sysfs(dir, 3);
  CHECK(m.at("neuron_core0/status/timeout") == 2);
  CHECK(m.at("neuron_core1/status/success") == 40);
  CHECK(m.at("neuron_core1/memory_usage/device_mem/tensors") == 4096);
  CHECK(m.at("host_mem/tensors") == 8);
  CHECK(read_neuron_sysfs(dir, 0).empty());
  fs::remove_all(dir);
}

TEST_CASE("device signals: samples are capped per kind, and what was not kept is counted", "[signals]") {
  std::string dir = temp_dir();
  std::string nd = neuron_sysfs_dir(dir, 0);
  put(nd + "/neuron_core0/stats/status/success/total", "1\n");
  SignalsConfig cfg;
  cfg.sysfs_root = dir;
  cfg.dev_root = dir + "/no-dev";
  cfg.sysfs_interval_ns = 1;  // every tick
  cfg.max_samples = 3;
  DeviceSignals sig(cfg);
  for (uint64_t t = 1; t <= 10; ++t) sig.tick(t * 1'000'000, {});
  const auto& d = sig.data();
  CHECK(d.sysfs.size() == 3);
  CHECK(d.samples_dropped == 7);
  fs::remove_all(dir);
}

namespace {
// The datastore system calls, counted: every device answers "no datastore"
// except `owner_dev` for `owner` once `owner_from_ns` has passed.
class CountingOps : public NdsDeviceOps {
 public:
  std::map<std::string, int> opens;     // by path
  std::map<std::string, int> fds;       // by path
  std::map<int, uint64_t> closes;       // by fd
  std::set<uint32_t> asked;             // pids ACQUIRE was called for
  uint64_t acquires = 0;
  std::map<uint64_t, uint64_t> acquires_per_s;  // second of the simulated clock -> ioctls
  uint64_t now = 0;
  uint32_t owner = 0;
  std::string owner_dev;
  uint64_t owner_from_ns = UINT64_MAX;
  std::vector<uint8_t> slab = std::vector<uint8_t>(kNdsSlabBytes, 0);

  int open_device(const std::string& path) override {
    ++opens[path];
    return fds[path] = 1000 + static_cast<int>(fds.size());
  }
  int acquire(int fd, uint32_t pid, uint64_t* off, uint32_t* size) override {
    ++acquires;
    ++acquires_per_s[now / 1'000'000'000ull];
    asked.insert(pid);
    if (pid == owner && fds.count(owner_dev) && fd == fds[owner_dev] && now >= owner_from_ns) {
      *off = 0;
      *size = static_cast<uint32_t>(slab.size());
      return 0;
    }
    errno = ENOENT;
    return -1;
  }
  const uint8_t* map(int, const std::string&, uint64_t, size_t) override { return slab.data(); }
  void unmap(const uint8_t*, size_t) override {}
  void close_device(int fd) override { ++closes[fd]; }
};
}  // namespace

TEST_CASE("device signals: under attach --all each device is opened once and ACQUIRE calls are rate-limited in total",
          "[signals]") {
  std::string dir = temp_dir();
  constexpr int kDevices = 16, kProcs = 1000;
  for (int i = 0; i < kDevices; ++i) put(dir + "/dev/neuron" + std::to_string(i), "");
  CountingOps ops;
  std::memcpy(ops.slab.data(), "nds", 4);
  SignalsConfig cfg;
  cfg.sysfs_root = dir + "/sys";
  cfg.dev_root = dir + "/dev";
  cfg.ops = &ops;
  std::vector<uint32_t> pids;
  for (uint32_t p = 0; p < kProcs; ++p) pids.push_back(10'000 + p);
  // The rank: seen issuing accelerator ioctls, its datastore on neuron5 from t = 2 s.
  const uint32_t rank = 10'000 + 777;
  ops.owner = rank;
  ops.owner_dev = dir + "/dev/neuron5";
  ops.owner_from_ns = 2'000'000'000ull;
  const uint64_t t0 = 1'000'000'000ull;
  uint64_t attached_at = 0;
  {
    DeviceSignals sig(cfg);
    REQUIRE(sig.data().devices.size() == kDevices);
    // 20 s of 10 ms drain ticks, every process passed in on every tick (what attach --all does).
    for (uint64_t t = t0; t < t0 + 20'000'000'000ull; t += 10'000'000) {
      ops.now = t;
      sig.tick(t, pids, {rank});
      if (!attached_at && sig.data().pid_device.count(rank)) attached_at = t;
    }
    // Each device once, for the whole session.
    CHECK(ops.opens.size() == kDevices);
    for (const auto& [path, n] : ops.opens) CHECK(n == 1);
    CHECK(sig.data().device_opens == kDevices);
    CHECK(sig.data().acquire_calls == ops.acquires);
    // ACQUIRE in total: the bucket (500/s, burst 64), whatever the number of
    // processes. Unbounded it was ~1000 processes x 16 devices every 10-100 ms.
    CHECK(ops.acquires <= static_cast<uint64_t>(20 * cfg.attach_ioctls_per_s) + cfg.attach_ioctl_burst);
    for (const auto& [sec, n] : ops.acquires_per_s)
      CHECK(n <= static_cast<uint64_t>(cfg.attach_ioctls_per_s) + cfg.attach_ioctl_burst);
    CHECK(ops.acquires > 1000);  // the budget is used, not starved
    // The rank driving the accelerator still gets its datastore promptly.
    REQUIRE(attached_at > 0);
    CHECK(attached_at - ops.owner_from_ns < 200'000'000ull);
    CHECK(sig.data().pid_device.at(rank) == 5);
    CHECK(ops.closes.empty());  // fds stay open while sampling
  }
  // ...and are closed once at the end of the session.
  CHECK(ops.closes.size() == kDevices);
  for (const auto& [fd, n] : ops.closes) CHECK(n == 1);
  fs::remove_all(dir);
}

TEST_CASE("device signals: processes get their turn in a long list, and a driver without NDS is asked once",
          "[signals]") {
  std::string dir = temp_dir();
  put(dir + "/dev/neuron0", "");
  CountingOps ops;
  SignalsConfig cfg;
  cfg.sysfs_root = dir + "/sys";
  cfg.dev_root = dir + "/dev";
  cfg.ops = &ops;
  cfg.attach_ioctls_per_s = 100;
  cfg.attach_ioctl_burst = 10;
  std::vector<uint32_t> pids;
  for (uint32_t p = 1; p <= 300; ++p) pids.push_back(p);
  DeviceSignals sig(cfg);
  // 4 s at 100 ioctls/s + 10: ~410 ioctls for 300 processes on one device:
  // every process is asked (round robin from where the last tick stopped),
  // none starves behind the head of the list, which keeps retrying.
  for (uint64_t t = 1'000'000'000ull; t < 5'000'000'000ull; t += 10'000'000) {
    ops.now = t;
    sig.tick(t, pids);
  }
  CHECK(ops.asked.size() == pids.size());
  CHECK(ops.acquires <= 4 * 100 + 10);
  CHECK(ops.opens.size() == 1);
  CHECK(sig.data().nds_problem.find("no datastore") != std::string::npos);
  fs::remove_all(dir);

  // A regular file answers ENOTTY to ACQUIRE: one ioctl, then no more for anyone.
  std::string dir2 = temp_dir();
  put(dir2 + "/dev/neuron0", "");
  SignalsConfig real;
  real.sysfs_root = dir2 + "/sys";
  real.dev_root = dir2 + "/dev";
  DeviceSignals old_driver(real);
  for (uint64_t t = 1; t < 1'000'000'000ull; t += 10'000'000) old_driver.tick(t, pids);
  CHECK(old_driver.data().acquire_calls == 1);
  CHECK(old_driver.data().device_opens == 1);
  CHECK(old_driver.data().nds_problem.find("old driver") != std::string::npos);
  fs::remove_all(dir2);
}

TEST_CASE("numa: CPU lists parse, malformed parts are skipped", "[signals]") {
  CHECK(parse_cpu_list("0-3,8,10-11") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("").empty());
  CHECK(parse_cpu_list("5") == std::vector<int>{5});
  CHECK(parse_cpu_list("x,2,4-3,-1,7-8") == std::vector<int>{2, 7, 8});
}

TEST_CASE("numa: nodes and Neuron devices in bus order are read from a fake sysfs tree", "[signals]") {
  std::string dir = temp_dir();
  put(dir + "/devices/system/node/node0/cpulist", "0-1\n");
  put(dir + "/devices/system/node/node1/cpulist", "2-3\n");
  put(dir + "/devices/system/node/possible", "0-1\n");  // not a node directory
  auto pci = [&](const std::string& bdf, const char* vendor, const char* device, const char* node) {
    put(dir + "/bus/pci/devices/" + bdf + "/vendor", vendor);
    put(dir + "/bus/pci/devices/" + bdf + "/device", device);
    put(dir + "/bus/pci/devices/" + bdf + "/numa_node", node);
  };
  pci("0000:a0:1e.0", "0x1d0f\n", "0x7164\n", "1\n");  // neuron1 (bus order)
  pci("0000:10:1e.0", "0x1d0f\n", "0x7164\n", "0\n");  // neuron0
  pci("0000:10:1f.0", "0x1d0f\n", "0xefa1\n", "0\n");  // EFA: same vendor, not Neuron
  pci("0000:b0:1e.0", "0x1d0f\n", "0x7364\n", "-1\n"); // neuron2, firmware gave no node
  pci("0000:00:03.0", "0x8086\n", "0x7164\n", "0\n");  // another vendor
  auto t = read_numa_topology(dir);
  CHECK(t.nodes == 2);
  CHECK(t.multi_node());
  CHECK(t.node_of_cpu(1) == 0);
  CHECK(t.node_of_cpu(3) == 1);
  CHECK(t.node_of_cpu(9) == -1);
  CHECK(t.device_node.at(0) == 0);
  CHECK(t.device_node.at(1) == 1);
  CHECK(t.device_node.count(2) == 0);
  CHECK(t.device_bdf.at(0) == "0000:10:1e.0");
  CHECK(t.device_bdf.at(2) == "0000:b0:1e.0");
  CHECK(t.device_bdf.size() == 3);
  fs::remove_all(dir);
  auto none = read_numa_topology(dir);  // gone: nothing known, no error
  CHECK_FALSE(none.multi_node());
  CHECK(none.device_node.empty());
}

// The session's drain sleeps up to 100 ms; the sampler asks for its own
// ticks. Nothing is due on a host without devices (looking for them rides on
// the drains); every 10 ms while a datastore is being attached or is read;
// after the attach gives up, only the sysfs metrics' low rate.
TEST_CASE("device signals: a sample is due every 10 ms while a datastore is read or being attached, never without devices",
          "[signals]") {
  std::string dir = temp_dir();
  const uint64_t t0 = 1'000'000'000ull, ms = 1'000'000;
  {
    SignalsConfig none;
    none.sysfs_root = dir + "/sys";
    none.dev_root = dir + "/no-dev";
    DeviceSignals sig(none);
    CHECK(sig.next_due_ns() == UINT64_MAX);  // before the first tick
    sig.tick(t0, {100});
    CHECK(sig.next_due_ns() == UINT64_MAX);
  }
  put(dir + "/dev/neuron0", "");
  CountingOps ops;
  std::memcpy(ops.slab.data(), "nds", 4);
  ops.owner = 100;
  ops.owner_dev = dir + "/dev/neuron0";
  ops.owner_from_ns = t0 + 50 * ms;
  SignalsConfig cfg;
  cfg.sysfs_root = dir + "/sys";
  cfg.dev_root = dir + "/dev";
  cfg.ops = &ops;
  cfg.attach_give_up_ns = 2'000'000'000ull;
  {
    DeviceSignals sig(cfg);
    // Not attached yet (the rank has no datastore until t0 + 50 ms): retried every 10 ms.
    ops.now = t0;
    sig.tick(t0, {100});
    CHECK(sig.data().pid_device.empty());
    CHECK(sig.next_due_ns() == t0 + 10 * ms);
    // Ticks when asked: attached as soon as the datastore exists, then read every 10 ms.
    uint64_t t = t0;
    while (sig.data().pid_device.empty() && t < t0 + 200 * ms) {
      t = sig.next_due_ns();
      ops.now = t;
      sig.tick(t, {100});
    }
    REQUIRE(sig.data().pid_device.count(100));
    CHECK(t - ops.owner_from_ns <= 10 * ms);
    CHECK(sig.next_due_ns() == t + 10 * ms);
  }
  {
    // A process that never gets a datastore: due every 10 ms until the attach
    // gives up, then only at the sysfs metrics' interval.
    DeviceSignals sig(cfg);
    ops.now = t0;
    sig.tick(t0, {200});
    CHECK(sig.next_due_ns() == t0 + 10 * ms);
    const uint64_t late = t0 + cfg.attach_give_up_ns + 100 * ms;
    ops.now = late;
    sig.tick(late, {200});
    CHECK(sig.data().pid_device.empty());
    CHECK(sig.next_due_ns() > late + 10 * ms);
    CHECK(sig.next_due_ns() <= late + cfg.sysfs_interval_ns);
  }
  fs::remove_all(dir);
}

// The daemon's sampler runs on its own thread: each execution a rank ends is
// read while the thread that owns the sampler never ticks it (a window's
// analysis holds the daemon's main thread for longer than a step). The next
// execution ends only once the last was sampled, so the test does not depend
// on how fast this machine is; a sampler that is not ticked reads none.
TEST_CASE("device signals: the sampler thread reads each execution without its owner's ticks", "[signals]") {
  std::string dir = temp_dir();
  put(dir + "/dev/neuron0", "");
  CountingOps ops;
  std::memcpy(ops.slab.data(), "nds", 4);
  ops.owner = 100;
  ops.owner_dev = dir + "/dev/neuron0";
  ops.owner_from_ns = 0;
  SignalsConfig cfg;
  cfg.sysfs_root = dir + "/sys";
  cfg.dev_root = dir + "/dev";
  cfg.ops = &ops;
  auto* count = reinterpret_cast<uint64_t*>(ops.slab.data() + nds_nc_offset(0, kNcInferenceCount));
  constexpr uint64_t kExecutions = 20;
  {
    SamplerThread sampler(cfg);
    sampler.set_pids({100});
    auto seen = [&](uint64_t n) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < end) {
        const SignalsData d = sampler.snapshot();
        if (!d.nds.empty() && d.nds.back().snap.inference_count == n) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      return false;
    };
    auto attached = [&] {
      for (int i = 0; i < 10'000 && !sampler.snapshot().pid_device.count(100); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return sampler.snapshot().pid_device.count(100) == 1;
    };
    REQUIRE(attached());
    for (uint64_t n = 1; n <= kExecutions; ++n) {
      __atomic_store_n(count, n, __ATOMIC_RELEASE);
      REQUIRE(seen(n));
    }
    const SignalsData d = sampler.snapshot();
    size_t exact = 0;
    for (const auto& s : d.nds) exact += s.pid == 100 && s.nc == 0 && s.delta == 1;
    CHECK(exact == kExecutions);
    CHECK(sampler.ticks() >= kExecutions);
    // Samples before a time are forgotten on request, between two ticks.
    sampler.forget_before(UINT64_MAX);
    CHECK(sampler.snapshot().nds.empty());
  }
  fs::remove_all(dir);
}
