// SPDX-License-Identifier: Apache-2.0
#include "signals/counters.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "neuron_uapi.h"
#include "util/sys_root.h"

namespace steptrace::signals {

uint64_t nds_nc_offset(int n, int k) {
  if (n <= 3 && k <= 30) return 256 + static_cast<uint64_t>(31 * n + k) * 8;
  if (n <= 3) return 55936 + static_cast<uint64_t>(64 * n + (k - 31)) * 8;
  return 57984 + static_cast<uint64_t>(96 * (n - 4) + k) * 8;
}

double nds_decode_seconds(uint64_t raw) {
  if (raw == 0) return 0;
  double d;
  std::memcpy(&d, &raw, sizeof(d));
  // A double of a duration between 1 ns and ~1 day has a biased exponent
  // in [993, 1040]; as an integer that is > 2^61 microseconds (73 kyears).
  uint64_t exp = (raw >> 52) & 0x7ff;
  if ((raw >> 63) == 0 && exp >= 993 && exp <= 1040 && std::isfinite(d)) return d;
  return static_cast<double>(raw) / 1e6;
}

namespace {
uint64_t load64(const uint8_t* p, size_t size, uint64_t off) {
  if (off + 8 > size) return 0;
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p + off), __ATOMIC_ACQUIRE);
}
}  // namespace

bool nds_header_ok(const uint8_t* slab, size_t size) {
  return slab && size >= 8 && std::memcmp(slab, "nds", 4) == 0;
}

NdsNcSnapshot nds_read_nc(const uint8_t* p, size_t size, int nc) {
  NdsNcSnapshot s;
  auto at = [&](int k) { return load64(p, size, nds_nc_offset(nc, k)); };
  // No lock exists between writer and reader (device-counters.md 1.6): read
  // the sequence number around the last-value words and retry on change.
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint64_t c1 = at(kNcInferenceCount);
    s.device_s = nds_decode_seconds(at(kNcLatencyDevice));
    s.total_s = nds_decode_seconds(at(kNcLatencyTotal));
    s.compute_s = nds_decode_seconds(at(kNcTime));
    s.cc_s = nds_decode_seconds(at(kNcCcTime));
    s.completed = at(kNcInferCompleted);
    s.errors = at(kNcInferWithErr) + at(kNcInferWithNumErr) + at(kNcInferBadInput) + at(kNcInferFailedToQueue) +
               at(kNcGenericFail);
    s.timeouts = at(kNcInferTimedOut);
    s.cc_hw_errors = at(kNcHwErrCollectives);
    s.time_in_use_us = at(kNcTimeInUse);
    uint64_t c2 = at(kNcInferenceCount);
    s.inference_count = c2;
    if (c1 == c2) break;
  }
  return s;
}

const char* nds_error_text(NdsError e) {
  switch (e) {
    case NdsError::none: return "ok";
    case NdsError::no_device: return "no Neuron device under the device root";
    case NdsError::no_permission: return "no permission to open the Neuron device";
    case NdsError::unsupported: return "the driver does not support ACQUIRE_NEURON_DS (old driver)";
    case NdsError::no_datastore: return "the process has no datastore on this device";
    case NdsError::map_failed: return "cannot map the datastore";
    case NdsError::bad_layout: return "the datastore has an unknown layout";
  }
  return "?";
}

int NdsDeviceOps::open_device(const std::string& path) {
  // ACQUIRE needs a normal open (an O_WRONLY "free access" handle cannot).
  return ::open(path.c_str(), O_RDWR | O_CLOEXEC);
}

int NdsDeviceOps::acquire(int fd, uint32_t pid, uint64_t* mmap_offset, uint32_t* size) {
  neuron_arg_neuron_ds_info a{};
  a.pid = static_cast<int32_t>(pid);
  int rc;
  do {
    rc = ::ioctl(fd, NEURON_CMD_ACQUIRE_NEURON_DS, &a);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return -1;
  *mmap_offset = a.mmap_offset;
  *size = a.size;
  return 0;
}

const uint8_t* NdsDeviceOps::map(int fd, const std::string& dev_path, uint64_t offset, size_t size) {
  int map_fd = fd;
  int window = -1;
  struct stat st {};
  std::string win = dev_path + ".nds";
  if (::stat(win.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    window = ::open(win.c_str(), O_RDONLY | O_CLOEXEC);
    if (window >= 0) map_fd = window;
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(offset));
  int map_errno = errno;
  if (window >= 0) ::close(window);
  errno = map_errno;
  return m == MAP_FAILED ? nullptr : static_cast<const uint8_t*>(m);
}

void NdsDeviceOps::unmap(const uint8_t* p, size_t size) { ::munmap(const_cast<uint8_t*>(p), size); }

void NdsDeviceOps::close_device(int fd) { ::close(fd); }

NdsDeviceOps& system_nds_ops() {
  static NdsDeviceOps ops;
  return ops;
}

NdsView::NdsView(NdsView&& o) noexcept { *this = std::move(o); }
NdsView& NdsView::operator=(NdsView&& o) noexcept {
  if (this != &o) {
    close();
    ops_ = o.ops_;
    fd_ = o.fd_;
    map_ = o.map_;
    size_ = o.size_;
    o.fd_ = -1;
    o.map_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}
NdsView::~NdsView() { close(); }

void NdsView::close() {
  if (map_ && ops_) ops_->unmap(map_, size_);
  // No RELEASE: for a foreign pid the driver ignores it anyway, and closing
  // the fd detaches this reader.
  if (fd_ >= 0 && ops_) ops_->close_device(fd_);
  map_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

NdsError NdsView::open(const std::string& dev_path, uint32_t pid, int* err_no, NdsDeviceOps& ops) {
  close();
  ops_ = &ops;
  int fd = ops.open_device(dev_path);
  if (fd < 0) {
    if (err_no) *err_no = errno;
    return errno == EACCES || errno == EPERM ? NdsError::no_permission : NdsError::no_device;
  }
  NdsError e = attach(fd, dev_path, pid, err_no, ops);
  if (e == NdsError::none) fd_ = fd;  // owned from now on
  else ops.close_device(fd);
  return e;
}

NdsError NdsView::attach(int dev_fd, const std::string& dev_path, uint32_t pid, int* err_no, NdsDeviceOps& ops) {
  close();
  ops_ = &ops;
  auto fail = [&](NdsError e) {
    if (err_no) *err_no = errno;
    close();
    return e;
  };
  uint64_t offset = 0;
  uint32_t size = 0;
  if (ops.acquire(dev_fd, pid, &offset, &size) < 0) {
    if (errno == ENOENT) return fail(NdsError::no_datastore);
    if (errno == EACCES || errno == EPERM) return fail(NdsError::no_permission);
    return fail(NdsError::unsupported);  // ENOTTY/EINVAL: nr 71 unknown to this driver
  }
  if (size < kNdsRequiredBytes || size > (64u << 20)) {
    errno = EINVAL;
    return fail(NdsError::bad_layout);
  }
  const uint8_t* m = ops.map(dev_fd, dev_path, offset, size);
  if (!m) return fail(NdsError::map_failed);
  map_ = m;
  size_ = size;
  return NdsError::none;
}

std::vector<std::pair<int, std::string>> find_neuron_devices(const std::string& dev_root) {
  std::vector<std::pair<int, std::string>> out;
  DIR* d = ::opendir(dev_root.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.rfind("neuron", 0) != 0 || n.size() == 6) continue;
    int idx = 0;
    auto [p, ec] = std::from_chars(n.data() + 6, n.data() + n.size(), idx);
    if (ec != std::errc{} || p != n.data() + n.size()) continue;
    out.emplace_back(idx, dev_root + "/" + std::string(n));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<double> parse_ib_rate_gbit(std::string_view t) {
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  size_t i = 0;
  while (i < t.size() && ((t[i] >= '0' && t[i] <= '9') || t[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  std::string num(t.substr(0, i));
  char* end = nullptr;
  double v = std::strtod(num.c_str(), &end);
  std::string_view rest = t.substr(i);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.rfind("Gb/sec", 0) == 0) return v;
  if (rest.rfind("Mb/sec", 0) == 0) return v / 1000.0;
  return std::nullopt;
}

const std::vector<std::string>& efa_counter_names() {
  static const std::vector<std::string> n{"tx_bytes",           "rx_bytes",          "tx_pkts",
                                          "rx_pkts",            "rx_drops",          "send_bytes",
                                          "recv_bytes",         "rdma_read_bytes",   "rdma_read_resp_bytes",
                                          "rdma_write_bytes",   "rdma_write_recv_bytes", "rdma_read_wr_err",
                                          "rdma_write_wr_err",  "retrans_bytes",     "retrans_timeout_events",
                                          "unresponsive_remote_events", "impaired_remote_conn_events"};
  return n;
}

std::vector<EfaPort> find_efa_ports(const std::string& sysfs_root) {
  std::vector<EfaPort> out;
  std::string base = sysfs_root + "/class/infiniband";
  DIR* d = ::opendir(base.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.rfind("efa_", 0) != 0) continue;
    int idx = 0;
    auto [p, ec] = std::from_chars(n.data() + 4, n.data() + n.size(), idx);
    if (ec != std::errc{} || p != n.data() + n.size()) continue;
    EfaPort port;
    port.index = idx;
    port.name = std::string(n);
    port.counters_dir = base + "/" + port.name + "/ports/1/hw_counters";
    if (auto r = read_small_file(base + "/" + port.name + "/ports/1/rate", 256))
      port.rate_gbit = parse_ib_rate_gbit(*r).value_or(0);
    struct stat st {};
    if (::stat(port.counters_dir.c_str(), &st) == 0) out.push_back(port);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const EfaPort& a, const EfaPort& b) { return a.index < b.index; });
  return out;
}

namespace {
std::optional<uint64_t> read_u64(const std::string& path) {
  auto s = read_small_file(path, 64);
  if (!s) return std::nullopt;
  uint64_t v = 0;
  const char* b = s->data();
  auto [p, ec] = std::from_chars(b, b + s->size(), v);
  if (ec != std::errc{} || p == b) return std::nullopt;
  return v;
}
}  // namespace

std::map<std::string, uint64_t> read_efa_counters(const EfaPort& port) {
  std::map<std::string, uint64_t> out;
  for (const auto& n : efa_counter_names())
    if (auto v = read_u64(port.counters_dir + "/" + n)) out[n] = *v;
  return out;
}

std::string neuron_sysfs_dir(const std::string& sysfs_root, int device) {
  return sysfs_root + "/devices/virtual/neuron_device/neuron" + std::to_string(device);
}

std::map<std::string, uint64_t> read_neuron_sysfs(const std::string& sysfs_root, int device) {
  std::map<std::string, uint64_t> out;
  std::string base = neuron_sysfs_dir(sysfs_root, device);
  static const char* status[] = {"success",  "failure",        "timeout",         "exec_bad_input",
                                 "hw_error", "generic_error",  "resource_error",  "hw_collectives_error",
                                 "execute_completed_with_error", "execute_failed_to_queue"};
  static const char* mem[] = {"model_code", "tensors", "constants", "collectives", "dma_rings"};
  struct stat dir {};
  if (::stat(base.c_str(), &dir) != 0) return out;  // no such device: one stat, not one per core
  for (int c = 0; c < 16; ++c) {
    std::string nc = "neuron_core" + std::to_string(c);
    struct stat st {};
    if (::stat((base + "/" + nc).c_str(), &st) != 0) continue;
    for (const char* s : status)
      if (auto v = read_u64(base + "/" + nc + "/stats/status/" + s + "/total")) out[nc + "/status/" + s] = *v;
    for (const char* m : mem)
      if (auto v = read_u64(base + "/" + nc + "/stats/memory_usage/device_mem/" + m + "/total"))
        out[nc + "/memory_usage/device_mem/" + m] = *v;
  }
  if (auto v = read_u64(base + "/stats/memory_usage/host_mem/tensors/total")) out["host_mem/tensors"] = *v;
  return out;
}

}  // namespace steptrace::signals
