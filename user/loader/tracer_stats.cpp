// SPDX-License-Identifier: Apache-2.0
// Reading what the loaded programs counted: the per-process aggregation map,
// drops, emitted counts and losses, each program's run time.
#include "loader/tracer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "steptrace_bpf.skel.h"

namespace steptrace {

Result<std::map<uint32_t, st_proc_agg>> BpfTracer::read_proc_agg() const {
  std::map<uint32_t, st_proc_agg> out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return make_error("cannot count CPUs");
  std::vector<st_proc_agg> per_cpu(static_cast<size_t>(ncpu));
  const bpf_map* m = skel_->maps.st_proc_agg_map;
  uint32_t key = 0, next = 0;
  const uint32_t* prev = nullptr;
  // A key evicted under the walk restarts it from the first key: bounded.
  size_t budget = 2 * static_cast<size_t>(bpf_map__max_entries(m)) + 2;
  while (budget-- > 0 && bpf_map__get_next_key(m, prev, &next, sizeof(next)) == 0) {
    key = next;
    prev = &key;
    // An entry evicted between the two calls is skipped.
    if (bpf_map__lookup_elem(m, &key, sizeof(key), per_cpu.data(), per_cpu.size() * sizeof(st_proc_agg), 0)) continue;
    st_proc_agg sum{};
    for (const auto& c : per_cpu) {
      sum.oncpu_ns += c.oncpu_ns;
      sum.runq_wait_ns += c.runq_wait_ns;
      sum.switches += c.switches;
      sum.involuntary += c.involuntary;
      sum.net_send_bytes += c.net_send_bytes;
      sum.net_recv_bytes += c.net_recv_bytes;
      sum.block_read_bytes += c.block_read_bytes;
      sum.block_write_bytes += c.block_write_bytes;
      sum.block_rqs += c.block_rqs;
    }
    out[key] = sum;
  }
  return out;
}

void BpfTracer::forget_proc_agg(uint32_t tgid) {
  if (bpf_map__delete_elem(skel_->maps.st_proc_agg_map, &tgid, sizeof(tgid), 0) == 0) ++agg_forgotten_;
}

namespace {

// Keys in a hash map now. Batched where the kernel can (one call for
// thousands of sockets), else key by key; bounded either way.
uint64_t count_keys(const bpf_map* m) {
  const uint32_t max = bpf_map__max_entries(m);
  const size_t ksz = bpf_map__key_size(m), vsz = bpf_map__value_size(m);
  if (bpf_map__type(m) == BPF_MAP_TYPE_LRU_HASH || bpf_map__type(m) == BPF_MAP_TYPE_HASH) {
    std::vector<uint8_t> keys(static_cast<size_t>(max) * ksz), vals(static_cast<size_t>(max) * vsz);
    uint64_t in = 0, out = 0, n = 0;
    bool first = true;
    for (int rounds = 0; rounds < 64; ++rounds) {
      uint32_t count = max - static_cast<uint32_t>(std::min<uint64_t>(n, max));
      if (count == 0) return n;
      LIBBPF_OPTS(bpf_map_batch_opts, o);
      int err = bpf_map_lookup_batch(bpf_map__fd(m), first ? nullptr : &in, &out, keys.data(), vals.data(), &count, &o);
      n += count;
      if (err) {
        if (errno == ENOENT) return n;  // walked to the end
        break;                          // no batch support: key by key
      }
      first = false;
      in = out;
    }
  }
  uint64_t n = 0;
  std::vector<uint8_t> key(ksz), next(ksz);
  const void* prev = nullptr;
  for (uint64_t budget = 2ull * max + 2; budget > 0; --budget) {
    if (bpf_map__get_next_key(m, prev, next.data(), ksz) != 0) break;
    ++n;
    key = next;
    prev = key.data();
  }
  return std::min<uint64_t>(n, max);
}

}  // namespace

Result<DropStats> BpfTracer::read_stats() const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return make_error("cannot count CPUs");
  std::vector<st_stats> per_cpu(static_cast<size_t>(ncpu));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(skel_->maps.st_stats_map, &zero, sizeof(zero), per_cpu.data(),
                           per_cpu.size() * sizeof(st_stats), 0))
    return make_error(fmt::format("cannot read drop counters: {}", std::strerror(errno)));
  DropStats d;
  for (const auto& c : per_cpu) {
    for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
      d.emitted[k] += c.emitted[k];
      d.dropped[k] += c.dropped[k];
    }
  }
  // Losses, read twice around the key counts: evictions = added (first read)
  // - removed (second read) - present (between) is never more than the truth
  // while programs keep adding and removing keys.
  std::vector<st_losses> lc(static_cast<size_t>(ncpu));
  auto read_losses = [&](st_losses* sum) -> bool {
    if (bpf_map__lookup_elem(skel_->maps.st_loss_map, &zero, sizeof(zero), lc.data(), lc.size() * sizeof(st_losses),
                             0))
      return false;
    *sum = {};
    for (const auto& c : lc) {
      for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) sum->lost[k] += c.lost[k];
      for (int k = 0; k < ST_LEDGER_MAX; ++k) sum->ledger[k] += c.ledger[k];
    }
    return true;
  };
  st_losses first{}, second{};
  if (!read_losses(&first)) return make_error(fmt::format("cannot read loss counters: {}", std::strerror(errno)));
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) d.losses[k] = first.lost[k];
  const uint64_t socks_added = first.ledger[ST_LEDGER_SOCK_ADDED];
  const uint64_t agg_added = first.ledger[ST_LEDGER_AGG_ADDED];
  uint64_t socks_now = 0, agg_now = 0;
  if (socks_added > 0) socks_now = count_keys(skel_->maps.st_socks);
  if (agg_added > 0) agg_now = count_keys(skel_->maps.st_proc_agg_map);
  if (!read_losses(&second)) return make_error(fmt::format("cannot read loss counters: {}", std::strerror(errno)));
  const uint64_t socks_gone = second.ledger[ST_LEDGER_SOCK_REMOVED] + socks_now;
  if (socks_added > socks_gone) sock_evicted_ = std::max(sock_evicted_, socks_added - socks_gone);
  const uint64_t agg_gone = agg_forgotten_ + agg_now;
  if (agg_added > agg_gone) agg_evicted_ = std::max(agg_evicted_, agg_added - agg_gone);
  d.losses[ST_LOSS_SOCK_EVICTED] += sock_evicted_;
  d.losses[ST_LOSS_AGG_EVICTED] += agg_evicted_;

  // kretprobe misses: the kernel counts them per kprobe and reports them in
  // the perf link's info from 6.7 on (perf_event.kprobe.missed). Older
  // kernels, and links that are not BPF links (no perf link support), cannot
  // say: "not measurable", never a silent zero.
  if (!kret_links_.empty()) {
    d.kretprobe = link_missed_ ? LossMeasure::measured : LossMeasure::not_measurable;
    for (auto* l : kret_links_) {
      if (d.kretprobe != LossMeasure::measured) break;
      // struct bpf_link_info up to perf_event.kprobe (uapi of 6.7+; the
      // installed headers predate it). Only the fields read are named.
      struct {
        uint32_t type, id, prog_id, pad0;
        uint32_t perf_type, pad1;
        uint64_t func_name;
        uint32_t name_len, offset;
        uint64_t addr, missed, cookie;
      } info{};
      static_assert(offsetof(decltype(info), missed) == 48, "bpf_link_info.perf_event.kprobe.missed");
      uint32_t len = sizeof(info);
      constexpr uint32_t kLinkPerfEvent = 7, kPerfEventKretprobe = 4;  // BPF_LINK_TYPE_PERF_EVENT, BPF_PERF_EVENT_KRETPROBE
      if (bpf_obj_get_info_by_fd(bpf_link__fd(l), &info, &len) != 0 || info.type != kLinkPerfEvent ||
          info.perf_type != kPerfEventKretprobe) {
        d.kretprobe = LossMeasure::not_measurable;
        break;
      }
      d.losses[ST_LOSS_KRETPROBE_MISSED] += info.missed;
    }
    if (d.kretprobe != LossMeasure::measured) d.losses[ST_LOSS_KRETPROBE_MISSED] = 0;
  }
  // Runs the kernel's recursion guard skipped, per program since load.
  for (const auto& p : prog_stats()) d.losses[ST_LOSS_PROG_MISSED] += p.recursion_misses;
  return d;
}

std::vector<ProgRunStats> BpfTracer::prog_stats() const {
  std::vector<ProgRunStats> out;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel_->obj) {
    int fd = bpf_program__fd(prog);
    if (fd < 0) continue;  // disabled (autoload off)
    bpf_prog_info info {};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    out.push_back({bpf_program__name(prog), info.run_time_ns, info.run_cnt, info.recursion_misses});
  }
  return out;
}

}  // namespace steptrace
