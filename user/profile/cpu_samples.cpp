// SPDX-License-Identifier: Apache-2.0
#include "profile/cpu_samples.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace steptrace {

std::optional<DecodedSample> decode_cpu_sample(const void* data, size_t len) {
  if (len < ST_CPU_SAMPLE_HDR_SIZE) return std::nullopt;
  st_cpu_sample r;
  std::memcpy(&r, data, ST_CPU_SAMPLE_HDR_SIZE);
  if (r.hdr.kind != ST_EV_CPU_SAMPLE || r.hdr.size > len || r.n_user > ST_SAMPLE_MAX_USER ||
      r.n_kernel > ST_SAMPLE_MAX_KERNEL || r.n_python > ST_SAMPLE_MAX_PYTHON)
    return std::nullopt;
  const size_t n = static_cast<size_t>(r.n_user) + r.n_kernel + r.n_python;
  if (r.hdr.size != ST_CPU_SAMPLE_HDR_SIZE + n * sizeof(uint64_t)) return std::nullopt;
  DecodedSample d;
  d.sample.ts = r.hdr.ts_ns;
  d.sample.pid = r.hdr.pid;
  d.sample.tid = r.hdr.tid;
  d.stack.pid = r.hdr.pid;
  d.stack.flags = r.flags;
  const auto* ips = static_cast<const uint8_t*>(data) + ST_CPU_SAMPLE_HDR_SIZE;
  d.stack.user.resize(r.n_user);
  d.stack.kernel.resize(r.n_kernel);
  if (r.n_user) std::memcpy(d.stack.user.data(), ips, r.n_user * sizeof(uint64_t));
  d.stack.python.resize(r.n_python);
  if (r.n_kernel) std::memcpy(d.stack.kernel.data(), ips + r.n_user * sizeof(uint64_t), r.n_kernel * sizeof(uint64_t));
  if (r.n_python)
    std::memcpy(d.stack.python.data(), ips + (r.n_user + r.n_kernel) * sizeof(uint64_t),
                r.n_python * sizeof(uint64_t));
  return d;
}

SampleStore::SampleStore() {
  // Slot 0: samples whose stack could not be kept (the table is full).
  stacks_.push_back(SampledStack{});
}

namespace {
uint64_t stack_hash(const SampledStack& s) {
  uint64_t h = 1469598103934665603ull ^ s.pid;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (auto ip : s.user) mix(ip);
  mix(0xfeedull);
  for (auto ip : s.kernel) mix(ip);
  mix(0xbeefull);
  for (auto ip : s.python) mix(ip);
  return h;
}
}  // namespace

uint32_t SampleStore::intern(SampledStack&& s) {
  const uint64_t h = stack_hash(s);
  auto& ids = by_hash_[h];
  for (uint32_t id : ids) {
    const auto& o = stacks_[id];
    if (o.pid == s.pid && o.flags == s.flags && o.user == s.user && o.kernel == s.kernel && o.python == s.python)
      return id;
  }
  if (stacks_.size() >= kMaxStacks) {
    ++overflowed_;
    return kOverflowStack;
  }
  stacks_.push_back(std::move(s));
  ids.push_back(static_cast<uint32_t>(stacks_.size() - 1));
  return ids.back();
}

bool SampleStore::on_record(const void* data, size_t len) {
  auto d = decode_cpu_sample(data, len);
  if (!d) {
    ++malformed_;
    return false;
  }
  d->sample.stack = intern(std::move(d->stack));
  if (!samples_.empty() && d->sample.ts < samples_.back().ts) sorted_ = false;
  samples_.push_back(d->sample);
  return true;
}

void SampleStore::sort_by_time() {
  if (sorted_) return;
  std::stable_sort(samples_.begin(), samples_.end(), [](const CpuSample& a, const CpuSample& b) { return a.ts < b.ts; });
  sorted_ = true;
}

void SampleStore::forget_before(uint64_t ts) {
  samples_.erase(std::remove_if(samples_.begin(), samples_.end(), [ts](const CpuSample& s) { return s.ts < ts; }),
                 samples_.end());
}

const std::string* SampleStore::name_of(uint32_t pid, uint64_t ip) const {
  auto it = names_.find({pid, ip});
  return it == names_.end() ? nullptr : &it->second;
}

std::vector<uint32_t> SampleStore::sampled_pids() const {
  std::set<uint32_t> p;
  for (size_t i = 1; i < stacks_.size(); ++i) p.insert(stacks_[i].pid);
  return {p.begin(), p.end()};
}

size_t SampleStore::memory_bytes() const {
  size_t b = samples_.capacity() * sizeof(CpuSample) + names_.size() * 96 + by_hash_.size() * 48;
  for (const auto& s : stacks_)
    b += sizeof(s) + (s.user.capacity() + s.kernel.capacity() + s.python.capacity()) * sizeof(uint64_t);
  return b;
}

}  // namespace steptrace
