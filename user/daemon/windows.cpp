// SPDX-License-Identifier: Apache-2.0
// Closing an analysis window: its steps fold into the per-rank series that
// the metrics export, its verdict stands until the next detailed window; and
// the once-a-second CPU sample that drives the degradation ladder.
#include "daemon/daemon_impl.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "util/log.h"
#include "util/sys_root.h"

namespace steptrace::daemon {

void Daemon::close_window(uint64_t now, const char* reason) {
  if (!window_open_) return;
  pipe_.name_threads(SysRoot());
  const uint64_t events = pipe_.window_records();
  DropStats cur{};
  if (tracer_)
    if (auto d = tracer_->read_stats()) cur = *d;
  DropStats delta = cur.since(drops_window_start_);
  // Processes that should have been traced in this window and were not (the
  // target set refused them) leave their work out of it: INCOMPLETE.
  delta.losses[ST_LOSS_TARGET_ADD] = std::max<uint64_t>(window_target_add_failed_, untraced_.size());
  window_target_add_failed_ = 0;
  window_incomplete_ = delta.incomplete();
  if (sampler_) signals_seen_ = sampler_->snapshot();  // what the analysis reads (start_device_signals)
  JobAnalysis ja = pipe_.close_window(now, delta);
  if (window_detail_) hang_.observe(ja);
  publish(ja, window_detail_);
  ++windows_total_;
  ++window_closes_[reason];
  ++detail_windows_[window_detail_ ? 1 : 0];
  log::debug("window {} closed ({}): {} events, {} ranks, detail {}", window_no_, reason, events,
             ja.ranks.size(), window_detail_ ? "on" : "off (sampled out: steps only)");
  ++window_no_;
  cycle_.window_closed();
  // The device counters: what the window just closed read, and what the
  // flight recorder still holds (a dump carries them), stay.
  if (sampler_) {
    const uint64_t keep = static_cast<uint64_t>(cfg_.flight_seconds * 1e9);
    sampler_->forget_before(std::min(window_start_ns_, now > keep ? now - keep : 0));
  }
  window_start_ns_ = now;
  drops_window_start_ = cur;
  seed_parents();
  apply_detail();
}

// Steps are counted from every window (the accelerator and runtime-probe
// records never stop); categories, straggler steps and the verdict only from
// windows that had per-event detail throughout: without it a step's time
// cannot be split, and partial detail would split it wrongly.
void Daemon::publish(const JobAnalysis& ja, bool detail) {
  // The p99 before this window's steps decides whether one of them is an outlier.
  double p99 = 0;
  if (step_history_.size() >= kMinHistory) {
    std::vector<double> v(step_history_.begin(), step_history_.end());
    size_t idx = std::min(v.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size()))) - 1);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
    p99 = v[idx];
  }
  double worst = 0;
  uint64_t counted_steps = 0;
  const int straggler_before = straggler_rank_;
  straggler_rank_ = -1;
  for (const auto& r : ja.ranks) {
    ProcIdentity id;
    if (auto it = identity_cache_.find(r.pid); it != identity_cache_.end()) id = it->second;
    else {
      id = scanner_.identity(r.pid);
      identity_cache_[r.pid] = id;
    }
    if (id.rank.empty()) {
      // No RANK in the environment: the rank's order in the first window it was seen, kept
      // for the life of the process so its series stay one series.
      id.rank = std::to_string(r.rank);
      identity_cache_[r.pid].rank = id.rank;
    }
    std::string rank = id.rank;
    // No pid in the key: a restarted rank continues its series.
    std::string key = fmt::format("{}\x1f{}", id.job, rank);
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= cfg_.max_series) {
        ++cap_hits_["series"];
        continue;
      }
      RankSeries s;
      s.job = id.job;
      s.rank = rank;
      s.node = id.node;
      it = series_.emplace(key, std::move(s)).first;
    }
    RankSeries& s = it->second;
    s.last_window = window_no_;
    s.pid_num = r.pid;
    s.procs[r.pid] = {id.comm, id.pod, id.pod_namespace, id.container, window_no_};
    if (detail) {
      // Counted steps (as in r.total), less any that began before the programs turned
      // detail on: records held back at the edge can start this window a little before that.
      for (const auto& st : r.steps) {
        if (st.index < ja.skipped_warmup_steps || st.start_ns < detail_since_ns_) continue;
        for (size_t c = 0; c < kCategories; ++c) s.cat_s[c] += static_cast<double>(st.ns[c]) / 1e9;
        s.add_steals(st);
        if (st.coupled) s.late_s += static_cast<double>(st.late_ns) / 1e9;
        // Numbered as the series counts its steps (the count below runs after this).
        const int number = static_cast<int>(s.count) + st.index - ja.skipped_warmup_steps + 1;
        s.recent.push_back({number, st.start_ns, st.duration(), st.ns});
        if (s.recent.size() > kChangeHistory) s.recent.pop_front();
      }
      s.straggler_steps += static_cast<uint64_t>(r.straggler_steps);
    }
    int skip = ja.skipped_warmup_steps;
    for (size_t i = 0; i < r.steps.size(); ++i) {
      if (static_cast<int>(i) < skip) continue;  // the window's first step may be cut at the edge
      double d = static_cast<double>(r.steps[i].duration()) / 1e9;
      for (size_t b = 0; b < kNumBuckets; ++b)
        if (d <= kBuckets[b]) ++s.buckets[b];
      s.sum_s += d;
      ++s.count;
      ++counted_steps;
      worst = std::max(worst, d);
      step_history_.push_back(d);
      if (step_history_.size() > kStepHistory) step_history_.pop_front();
    }
    if (detail && ja.verdict.straggler_rank == r.rank) {
      int n = r.rank;
      auto [p, ec] = std::from_chars(rank.data(), rank.data() + rank.size(), n);
      straggler_rank_ = ec == std::errc() && p == rank.data() + rank.size() ? n : r.rank;
    }
    for (const auto& f : ja.fabric.ranks) {
      if (f.pid != r.pid) continue;
      s.efa_calls[0] += f.in_steps.calls;
      s.efa_s[0] += static_cast<double>(f.in_steps.total_ns) / 1e9;
      s.efa_calls[1] += f.setup.calls + f.teardown.calls;
      s.efa_s[1] += static_cast<double>(f.setup.total_ns + f.teardown.total_ns) / 1e9;
    }
  }
  if (detail) watch_for_changes();
  if (!detail && budget_.level() <= kLevelSampled) {
    // Sampled out: the last detailed window's verdict and straggler stand.
    straggler_rank_ = straggler_before;
  } else if (!detail) {
    have_verdict_ = false;  // aggregated and up: no detail to judge from
  } else if (counted_steps > 0) {
    verdict_ = ja.verdict;
    have_verdict_ = true;
    log::info("verdict: {} ({:.0f}% confidence): {}", category_name(verdict_.category), verdict_.confidence * 100,
              verdict_.headline);
  } else {
    have_verdict_ = false;
  }
  // Series of processes that are gone and quiet for two windows are dropped;
  // so is a rank's info sample for a process that is gone and quiet.
  for (auto it = series_.begin(); it != series_.end();) {
    auto& procs = it->second.procs;
    for (auto p = procs.begin(); p != procs.end();) {
      if (p->first != it->second.pid_num && p->second.last_window + 2 < window_no_ && !scanner_.alive(p->first))
        p = procs.erase(p);
      else ++p;
    }
    if (it->second.last_window + 2 < window_no_ && !scanner_.alive(it->second.pid_num)) it = series_.erase(it);
    else ++it;
  }
  if (cfg_.auto_dump && p99 > 0 && worst > p99 * cfg_.auto_dump_factor &&
      now_s() - last_auto_dump_s_ >= cfg_.dump_min_interval_s) {
    log::warn("slow step: {:.3f} s > p99 {:.3f} s x {}: dumping the flight recorder", worst, p99, cfg_.auto_dump_factor);
    // Busy (a requested capture is being written): the next slow step tries again.
    if (auto r = start_dump("slow_step", "", nullptr); r) last_auto_dump_s_ = now_s();
    else log::error("flight recorder dump failed: {}", r.error().message);
  }
}

void Daemon::sample_cpu() {
  read_aggregates(false);
  double t = now_s();
  cpu_ = self_cpu_times();
  uint64_t run_ns = bpf_base_ns_, run_cnt = bpf_base_cnt_;
  if (tracer_)
    for (const auto& p : tracer_->prog_stats()) {
      run_ns += p.run_time_ns;
      run_cnt += p.run_cnt;
    }
  bpf_now_s_ += stats_.account(t, run_ns, run_cnt);
  // The budget counts userspace (all threads) plus BPF run time, less the
  // dump worker's CPU: captures are rate-limited, and compressing one must
  // not push the ladder down (steptrace_dump_cpu_seconds_total shows it).
  const double dump_cpu = dump_worker_.cpu_seconds();
  double total = cpu_.user + cpu_.sys + bpf_now_s_ - dump_cpu;
  // A second spent wholly in sampled-out windows (not the one whose
  // detailed window closed in it: that analysis is the costly part).
  const bool cheap = budget_.level() == kLevelSampled && !detail_since_sample_ && !window_detail_;
  detail_since_sample_ = window_detail_;
  if (last_sample_s_ > 0) {
    auto a = budget_.sample(t, total - last_cpu_total_, t - last_sample_s_, cheap);
    if (a == BudgetController::Action::degrade) {
      ++degradations_;
      apply_level(budget_.level(), "over budget");
    } else if (a == BudgetController::Action::recover) {
      apply_level(budget_.level(), "back under budget");
    }
  }
  // A rebuilt tracer's counters went into the bases (drop_tracer): the
  // counted BPF seconds go on from where they are.
  last_cpu_total_ = cpu_.user + cpu_.sys + bpf_now_s_ - dump_cpu;
  last_sample_s_ = t;
}

}  // namespace steptrace::daemon
