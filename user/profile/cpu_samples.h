// SPDX-License-Identifier: Apache-2.0
// On-CPU stack samples (ST_EV_CPU_SAMPLE) as the analysis keeps them: each
// sample points at an interned stack (the same addresses in the same process
// are stored once), and the names of the addresses, filled by whoever can
// read the binaries (a live session's symbolizer, or a capture's "symbols"
// note). Samples are not timeline events: they are joined with the steps by
// timestamp when a window is analysed (attribution/sample_classes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "steptrace_abi.h"

namespace steptrace {

struct CpuSample {
  uint64_t ts = 0;
  uint32_t pid = 0, tid = 0;
  uint32_t stack = 0;  // index into SampleStore::stacks()
};

// One distinct stack of one process: user addresses, kernel addresses and
// CPython code objects, each leaf (innermost) first, as the kernel walked them.
struct SampledStack {
  uint32_t pid = 0;
  uint16_t flags = 0;  // ST_SAMPLE_*: a walk that filled every slot misses the root
  std::vector<uint64_t> user, kernel, python;
};

// A sample record's content, decoded; nullopt when malformed.
struct DecodedSample {
  CpuSample sample;
  SampledStack stack;
};
std::optional<DecodedSample> decode_cpu_sample(const void* data, size_t len);

class SampleStore {
 public:
  // Past this many distinct stacks a new one is counted under kOverflowStack.
  static constexpr size_t kMaxStacks = 200000;
  static constexpr uint32_t kOverflowStack = 0;

  SampleStore();
  // A record of kind ST_EV_CPU_SAMPLE; false when malformed (counted).
  bool on_record(const void* data, size_t len);

  const std::vector<CpuSample>& samples() const { return samples_; }
  const std::vector<SampledStack>& stacks() const { return stacks_; }
  uint64_t malformed() const { return malformed_; }
  uint64_t overflowed() const { return overflowed_; }
  // Samples kept in arrival order; sorted by time on demand.
  void sort_by_time();
  // Samples before ts are no longer needed (counted by the caller).
  void forget_before(uint64_t ts);

  // Names of addresses: (pid, ip) for user code and Python code objects
  // (their addresses never collide with code), (0, ip) for the kernel.
  void set_name(uint32_t pid, uint64_t ip, std::string name) { names_[{pid, ip}] = std::move(name); }
  const std::string* name_of(uint32_t pid, uint64_t ip) const;
  const std::map<std::pair<uint32_t, uint64_t>, std::string>& names() const { return names_; }
  // Processes that have samples (the symbolizer's work list).
  std::vector<uint32_t> sampled_pids() const;
  size_t memory_bytes() const;

 private:
  uint32_t intern(SampledStack&& s);

  std::vector<CpuSample> samples_;
  std::vector<SampledStack> stacks_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_hash_;
  std::map<std::pair<uint32_t, uint64_t>, std::string> names_;
  uint64_t malformed_ = 0, overflowed_ = 0;
  bool sorted_ = true;
};

}  // namespace steptrace
