// SPDX-License-Identifier: Apache-2.0
// Device-side counters a kernel-only view cannot see, read the way the
// vendor's monitoring tools read them (facts: ../shared/domain/
// device-counters.md):
//  - the Neuron datastore (NDS): ACQUIRE_NEURON_DS(pid) on /dev/neuronN,
//    then a read-only mapping of the returned (mmap_offset, size);
//  - EFA hardware counters: <sysfs>/class/infiniband/efa_N/ports/1/hw_counters;
//  - Neuron sysfs metrics: <sysfs>/devices/virtual/neuron_device/neuronN/...
// Every path goes through a configurable root so tests use a fake tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace::signals {

// ---- NDS layout (driver >= 2.19.64; device-counters.md 1.3-1.5) ----
constexpr size_t kNdsSlabBytes = 262144;
constexpr size_t kNdsRequiredBytes = 67200;  // end of the defined map
enum NdsNc : int {
  kNcTimeInUse = 0,
  kNcInferCompleted = 1,
  kNcInferWithErr = 2,
  kNcInferWithNumErr = 3,
  kNcInferTimedOut = 4,
  kNcInferBadInput = 5,
  kNcInferFailedToQueue = 6,
  kNcLatencyDevice = 13,
  kNcLatencyTotal = 14,
  kNcTime = 15,
  kNcGenericFail = 16,
  kNcCcTime = 21,
  kNcInferenceCount = 28,
  kNcMacCount = 29,
  kNcHwErrCollectives = 31,
};
// Byte offset of NC counter k of physical NeuronCore n (n <= 15, k <= 94).
uint64_t nds_nc_offset(int nc, int k);

// The latency group's encoding is not documented (verify): a word that is a
// plausible IEEE-754 double is taken as seconds, otherwise as integer
// microseconds. Returns seconds.
double nds_decode_seconds(uint64_t raw);

struct NdsNcSnapshot {
  uint64_t inference_count = 0;  // executions recorded (sequence number)
  uint64_t completed = 0, errors = 0, timeouts = 0, cc_hw_errors = 0;
  uint64_t time_in_use_us = 0;
  double device_s = 0, total_s = 0, compute_s = 0, cc_s = 0;  // last execution
};
// Reads NC `nc` of a mapped slab; retries while the runtime updates it.
NdsNcSnapshot nds_read_nc(const uint8_t* slab, size_t size, int nc);
// Header check: 'n','d','s',0.
bool nds_header_ok(const uint8_t* slab, size_t size);

enum class NdsError { none, no_device, no_permission, unsupported, no_datastore, map_failed, bad_layout };
const char* nds_error_text(NdsError e);

// The system calls the datastore reader makes on a Neuron device. The real
// ones by default; tests substitute a fake that counts (and answers) them.
class NdsDeviceOps {
 public:
  virtual ~NdsDeviceOps() = default;
  // open(2) O_RDWR: the fd, or -1 with errno.
  virtual int open_device(const std::string& path);
  // ACQUIRE_NEURON_DS(pid): 0 with the mapping's offset and size, or -1 with errno.
  virtual int acquire(int fd, uint32_t pid, uint64_t* mmap_offset, uint32_t* size);
  // Read-only mapping of (offset, size) on fd, or from the window file
  // <dev_path>.nds when there is one; nullptr with errno.
  virtual const uint8_t* map(int fd, const std::string& dev_path, uint64_t offset, size_t size);
  virtual void unmap(const uint8_t* p, size_t size);
  virtual void close_device(int fd);
};
NdsDeviceOps& system_nds_ops();

// A read-only view of one process's datastore on one device.
class NdsView {
 public:
  NdsView() = default;
  NdsView(const NdsView&) = delete;
  NdsView& operator=(const NdsView&) = delete;
  NdsView(NdsView&& o) noexcept;
  NdsView& operator=(NdsView&& o) noexcept;
  ~NdsView();
  // open(device path) normally (attaches like any client), then attach().
  // The view owns that fd.
  NdsError open(const std::string& dev_path, uint32_t pid, int* err_no = nullptr,
                NdsDeviceOps& ops = system_nds_ops());
  // ACQUIRE with `pid` on an fd the caller keeps open (one per device for a
  // whole session), map (mmap_offset, size) read-only. A device that names a
  // window file next to itself (<device>.nds: trainsim's FUSE device, which
  // cannot map memory) is mapped from that file at the same offset.
  NdsError attach(int dev_fd, const std::string& dev_path, uint32_t pid, int* err_no = nullptr,
                  NdsDeviceOps& ops = system_nds_ops());
  const uint8_t* data() const { return map_; }
  size_t size() const { return size_; }
  bool ok() const { return map_ != nullptr; }

 private:
  void close();
  NdsDeviceOps* ops_ = nullptr;
  int fd_ = -1;  // owned (open()), -1 after attach() on a borrowed fd
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
};

// Neuron device files under a dev root: (index, path), sorted by index.
std::vector<std::pair<int, std::string>> find_neuron_devices(const std::string& dev_root);

// ---- EFA ----
struct EfaPort {
  int index = -1;              // efa_<index>
  std::string name;            // efa_0
  std::string counters_dir;    // .../ports/1/hw_counters
  double rate_gbit = 0;        // ports/1/rate (0 unknown)
};
std::vector<EfaPort> find_efa_ports(const std::string& sysfs_root);
// "100 Gb/sec (4X EDR)" -> 100
std::optional<double> parse_ib_rate_gbit(std::string_view text);
// Counters a step tracer uses (missing files are left out).
std::map<std::string, uint64_t> read_efa_counters(const EfaPort& port);
const std::vector<std::string>& efa_counter_names();

// ---- Neuron sysfs metrics ----
// Status counters (total) of every neuron_coreM of neuronN plus memory
// usage totals, keyed "neuron_core0/status/timeout",
// "neuron_core0/memory_usage/device_mem/tensors", "host_mem/tensors".
std::map<std::string, uint64_t> read_neuron_sysfs(const std::string& sysfs_root, int device);
std::string neuron_sysfs_dir(const std::string& sysfs_root, int device);

}  // namespace steptrace::signals
