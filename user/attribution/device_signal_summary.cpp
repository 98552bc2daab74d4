// SPDX-License-Identifier: Apache-2.0
#include "attribution/device_signal_summary.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "attribution/network_bound.h"

namespace steptrace {

using signals::DeviceSignalsSummary;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// What the summary adds up over the steps of every rank (tally_rank).
struct SignalTotals {
  bool split = false;
  std::vector<double> compute_ms, cc_ms, device_ms, ratios, tx_mib;
  PathTotal host_path, device_path, any_path;
  double link_gbit = 0;
  uint64_t proxy_runq = 0, proxy_preempts = 0, proxy_coll_ns = 0;
  std::map<uint32_t, uint64_t> preemptors;  // tid -> preemptions of proxy threads
  int proxy_steps = 0;
  bool proxy_base_nds = false, proxy_base_exec = false;
};

// This rank's steps into the totals: the NDS split, the network-bound test's
// terms, and, of counted steps, the proxies' delay and what it is compared
// with and the NDS per-execution times. Everything read is in the steps, so
// the totals of a long session add up every window's (resummarize_device_signals).
void tally_rank(const RankResult& r, size_t ri, bool has_proxy, int skip, SignalTotals& T) {
  using Base = signals::StepDeviceSignals::ProxyBase;
  for (const auto& st : r.steps) {
    T.split = T.split || st.dev.nds;
    if (st.dev.efa) T.link_gbit = std::max(T.link_gbit, st.dev.link_gbit);
    if (st.index < skip) continue;
    if (st.dev.efa) {
      if (st.dev.net_ratio >= 0) T.ratios.push_back(st.dev.net_ratio);
      T.tx_mib.push_back(static_cast<double>(st.dev.efa_tx_bytes) / 1048576.0);
      auto add = [&](const signals::StepDeviceSignals::NetPath& p, PathTotal& total) {
        if (p.coll_s > 0) total.steps.push_back({ri, p.link_s, p.coll_s});
      };
      add(st.dev.net_host, T.host_path);
      add(st.dev.net_device, T.device_path);
      add(st.dev.net_any, T.any_path);
    }
    if (has_proxy) {
      T.proxy_runq += st.dev.proxy_runq_ns;
      T.proxy_preempts += st.dev.proxy_preempted;
      for (const auto& p : st.dev.proxy_preemptors)
        if (p.n) T.preemptors[p.tid] += p.n;
      T.proxy_coll_ns += st.dev.proxy_base_ns;
      T.proxy_base_nds = T.proxy_base_nds || st.dev.proxy_base == Base::device_collective;
      T.proxy_base_exec = T.proxy_base_exec || st.dev.proxy_base == Base::executions;
      ++T.proxy_steps;
    }
    if (!st.dev.nds) continue;
    T.compute_ms.push_back(static_cast<double>(st.dev.compute_ns) / 1e6);
    T.cc_ms.push_back(static_cast<double>(st.dev.cc_ns) / 1e6);
    T.device_ms.push_back(static_cast<double>(st.dev.device_ns) / 1e6);
  }
}

void summarize(const SignalTotals& T, const ThreadTable& threads, DeviceSignalsSummary& S) {
  S.split_from_nds = T.split;
  S.mean_compute_ms = mean(T.compute_ms);
  S.mean_cc_ms = mean(T.cc_ms);
  S.mean_device_ms = mean(T.device_ms);
  // Medians decide: one stalled collective must not flip the whole window.
  if (!T.compute_ms.empty()) S.execution_bound = median(T.cc_ms) > median(T.compute_ms) ? "collective" : "compute";
  S.link_gbit = T.link_gbit;
  S.net_ratio = -1;
  for (const PathTotal* p : {&T.host_path, &T.device_path, &T.any_path}) S.net_ratio = std::max(S.net_ratio, p->ratio());
  if (S.net_ratio < 0 && !T.ratios.empty()) S.net_ratio = median(T.ratios);
  S.achieved_gbit = S.net_ratio >= 0 ? S.net_ratio * T.link_gbit : 0;
  S.network_bound = S.net_ratio >= 0.7;
  S.efa_mib_per_step = mean(T.tx_mib);
  S.proxy.available = !S.proxies.empty();
  S.proxy.detail = S.proxy.available ? fmt::format("{} proxy thread(s)", S.proxies.size())
                                     : "no network proxy thread identified (by name or behaviour)";
  S.proxy_runq_ms_per_step = T.proxy_steps ? static_cast<double>(T.proxy_runq) / T.proxy_steps / 1e6 : 0;
  S.proxy_preempted_per_step = T.proxy_steps ? static_cast<double>(T.proxy_preempts) / T.proxy_steps : 0;
  S.proxy_runq_share_of_collective =
      T.proxy_coll_ns ? static_cast<double>(T.proxy_runq) / static_cast<double>(T.proxy_coll_ns) : 0;
  S.proxy_share_of = T.proxy_base_nds    ? "inside the device collective (NDS)"
                     : T.proxy_base_exec ? "inside executions (no NDS: the device collective is not known)"
                                         : "inside the step's collective";
  S.proxy_top_preemptor[0] = '\0';
  if (!T.preemptors.empty()) {
    auto top = std::max_element(T.preemptors.begin(), T.preemptors.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    const auto* ti = threads.find(top->first);
    auto text = fmt::format("{}/{}", ti && !ti->comm.empty() ? ti->comm : "?", top->first);
    std::snprintf(S.proxy_top_preemptor, sizeof(S.proxy_top_preemptor), "%s", text.c_str());
  }
}

}  // namespace

void summarize_device_signal_steps(const std::vector<const RankResult*>& ranks, int skip, const ThreadTable& threads,
                                   DeviceSignalsSummary& S) {
  SignalTotals T;
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    bool has_proxy = false;
    for (const auto& p : S.proxies) has_proxy |= p.pid == ranks[ri]->pid;
    tally_rank(*ranks[ri], ri, has_proxy, skip, T);
  }
  summarize(T, threads, S);
}

void resummarize_device_signals(JobAnalysis& job, const ThreadTable& threads) {
  std::vector<const RankResult*> ranks;
  for (const auto& r : job.ranks) ranks.push_back(&r);
  summarize_device_signal_steps(ranks, job.skipped_warmup_steps, threads, job.signals);
}

}  // namespace steptrace
