// SPDX-License-Identifier: Apache-2.0
// Regressions caught when they start: after each detailed window, each
// training job's per-rank step series (the latest kChangeHistory counted
// steps) are searched for a change in step time (attribution/change_points.h).
// A change past the last one found is logged with the category and rank that
// moved, counted in steptrace_step_time_changes_total, exported with its
// size and time, and dumps the flight recorder (auto_dump, rate-limited like
// slow steps); the job's series then start again from the change, so the new
// level is the baseline for the next one.
#include "daemon/daemon_impl.h"

#include <fmt/core.h>
#include <time.h>

#include "util/log.h"

namespace steptrace::daemon {

namespace {

double wall_seconds_of(uint64_t mono_ns) {
  struct timespec rt {}, mt {};
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mt);
  const double offset = static_cast<double>(rt.tv_sec - mt.tv_sec) + static_cast<double>(rt.tv_nsec - mt.tv_nsec) / 1e9;
  return static_cast<double>(mono_ns) / 1e9 + offset;
}

std::string wall_text(double wall_s) {
  time_t secs = static_cast<time_t>(wall_s);
  struct tm tm {};
  char buf[32] = "?";
  if (gmtime_r(&secs, &tm)) strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void Daemon::watch_for_changes() {
  std::map<std::string, std::vector<RankSeries*>> by_job;
  for (auto& [key, s] : series_) by_job[s.job].push_back(&s);
  for (auto& [job, members] : by_job) {
    std::vector<std::vector<SeriesPoint>> pts(members.size());
    std::vector<RankSeriesView> views;
    for (size_t i = 0; i < members.size(); ++i) {
      pts[i].assign(members[i]->recent.begin(), members[i]->recent.end());
      views.push_back({static_cast<int>(i), &pts[i]});
    }
    auto found = find_changes(views);
    JobChange& jc = changes_[job];
    const ChangePoint* newest = nullptr;
    for (const auto& c : found)
      if (c.at_ns > jc.last.at_ns) newest = &c;  // in time order: the latest past the last one reported
    if (!newest) continue;
    ++jc.total[newest->slower() ? 1 : 0];
    jc.last = *newest;
    jc.cause_rank = newest->cause_rank >= 0 ? members[static_cast<size_t>(newest->cause_rank)]->rank : "";
    jc.wall_s = wall_seconds_of(newest->at_ns);
    std::string text = describe_change(*newest);
    if (newest->cause_rank >= 0)  // the series' rank label, not its position here
      text = text.substr(0, text.rfind(" on rank ")) + " on rank " + jc.cause_rank;
    log::warn("training job {}: {} at {}", job.empty() ? "(none)" : job, text, wall_text(jc.wall_s));
    for (auto* s : members)
      while (!s->recent.empty() && s->recent.front().start_ns < newest->at_ns) s->recent.pop_front();
    if (cfg_.auto_dump && now_s() - last_auto_dump_s_ >= cfg_.dump_min_interval_s) {
      if (auto r = start_dump("step_time_change", text, nullptr); r) last_auto_dump_s_ = now_s();
      else log::error("flight recorder dump failed: {}", r.error().message);
    }
  }
  for (auto it = changes_.begin(); it != changes_.end();)  // jobs whose series are gone
    it = by_job.count(it->first) ? std::next(it) : changes_.erase(it);
}

void Daemon::check_hang(uint64_t now) {
  // Threads that began before their window have no comm event in it: named
  // from /proc, as close_window does, or the probe finds no rank.
  if (hang_.probe_due(now)) pipe_.name_threads(SysRoot());
  auto h = hang_.check(now, pipe_.analysis(), SysRoot());
  if (!h) return;
  ++hangs_total_;
  log::warn("{}", h->headline());
  for (const auto& line : h->lines()) log::warn("  {}", line);
  if (cfg_.auto_dump && now_s() - last_auto_dump_s_ >= cfg_.dump_min_interval_s) {
    if (auto r = start_dump("hang", h->headline(), nullptr); r) last_auto_dump_s_ = now_s();
    else log::error("flight recorder dump failed: {}", r.error().message);
  }
}

void Daemon::render_change_metrics(Exposition& x) const {
  x.family("steptrace_hangs_total", "counter", "Times no step ended for longer than the hang threshold");
  x.sample("steptrace_hangs_total", host_labels({}), static_cast<double>(hangs_total_));
  x.family("steptrace_hang_active", "gauge",
           "1 while no step has ended for longer than max(hang_after_seconds, 10 x the step p99); the log names the "
           "ranks that did not join the collective");
  x.sample("steptrace_hang_active", host_labels({}), hang_.hung() ? 1 : 0);
  x.family("steptrace_step_time_changes_total", "counter",
           "Changes in a training job's step time found (>= 10 %, 8 steps either side), by direction");
  for (const auto& [job, c] : changes_) {
    x.sample("steptrace_step_time_changes_total", host_labels({{"training_job", job}, {"direction", "slower"}}),
             static_cast<double>(c.total[1]));
    x.sample("steptrace_step_time_changes_total", host_labels({{"training_job", job}, {"direction", "faster"}}),
             static_cast<double>(c.total[0]));
  }
  // Each family's samples right after its own # TYPE line (the text format's rule).
  x.family("steptrace_step_time_change_ratio", "gauge",
           "The last change in step time: mean step time after it over before it (1: none found)");
  for (const auto& [job, c] : changes_) {
    const bool any = c.total[0] + c.total[1] > 0;
    x.sample("steptrace_step_time_change_ratio", host_labels({{"training_job", job}}),
             any && c.last.before_ms > 0 ? c.last.after_ms / c.last.before_ms : 1.0);
  }
  x.family("steptrace_step_time_change_timestamp_seconds", "gauge", "Unix time of the first step after the last change");
  for (const auto& [job, c] : changes_)
    if (c.total[0] + c.total[1] > 0)
      x.sample("steptrace_step_time_change_timestamp_seconds", host_labels({{"training_job", job}}), c.wall_s);
  x.family("steptrace_step_time_change_cause_seconds", "gauge",
           "The last change: how much the category that moved most changed per step, on its rank");
  for (const auto& [job, c] : changes_)
    if (c.total[0] + c.total[1] > 0 && c.last.cause_rank >= 0)
      x.sample("steptrace_step_time_change_cause_seconds",
               host_labels({{"training_job", job}, {"rank", c.cause_rank},
                            {"category", std::string(category_name(c.last.cause))}}),
               c.last.cause_delta_ms / 1e3);
}

}  // namespace steptrace::daemon
