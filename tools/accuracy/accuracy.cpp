// SPDX-License-Identifier: Apache-2.0
#include "accuracy.h"

#include <fmt/core.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "session/session.h"

namespace steptrace::accuracy {

namespace tr = trainsim::truth;

namespace {

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

}  // namespace

tr::TracerResult to_tracer_result(const JobAnalysis& job, const TimelineStore* timeline) {
  tr::TracerResult out;
  for (const auto& r : job.ranks) {
    tr::TracerRank tr_rank;
    tr_rank.pid = static_cast<int>(r.pid);
    if (const ThreadTimeline* t = timeline ? timeline->find(r.main_tid) : nullptr)
      for (const auto& g : t->segs)
        if (g.state == ThreadState::runnable && g.end > g.start)
          tr_rank.runnable.emplace_back(static_cast<int64_t>(g.start), static_cast<int64_t>(g.end));
    for (const auto& st : r.steps) {
      tr::TracerStep s;
      s.start_ns = static_cast<int64_t>(st.start_ns);
      s.end_ns = static_cast<int64_t>(st.end_ns);
      for (size_t c = 0; c < kCategories; ++c) s.category_ns[std::string(kCategoryNames[c])] = static_cast<int64_t>(st.ns[c]);
      tr_rank.steps.push_back(s);
    }
    out.ranks.push_back(tr_rank);
  }
  return out;
}

bool run_scenario(const ScenarioRun& run, ScenarioResult* out, std::string* err) {
  char tmpl[] = "/tmp/steptrace-acc.XXXXXX";
  if (!mkdtemp(tmpl)) {
    *err = "mkdtemp failed";
    return false;
  }
  std::string dir = tmpl;
  std::string truth_path = dir + "/truth.json";
  std::string dev_dir = dir + "/dev";  // the FUSE mount point: nothing else may live in it
  std::filesystem::create_directory(dev_dir);
  Options o;
  o.command = CommandKind::run;
  o.subsystems = *parse_subsystems("all");
  o.sample_hz = run.sample_hz;
  // Rank r drives neuron<r>: every rank's device file, or the ranks past the
  // first would run with no ioctls traced.
  int ranks = 2;  // trainsim's default
  for (size_t i = 0; i + 1 < run.extra_args.size(); ++i)
    if (run.extra_args[i] == "--ranks") ranks = std::max(1, std::atoi(run.extra_args[i + 1].c_str()));
  for (int r = 0; r < ranks; ++r) o.accel_devs.push_back(dev_dir + "/neuron" + std::to_string(r));
  o.rdma_devs = {dev_dir + "/uverbs0"};  // the EFA control path (setup events)
  if (run.datastore) o.dev_root = dev_dir;
  o.argv = {run.trainsim, "--scenario", run.scenario, "--dev-dir", dev_dir, "--truth", truth_path};
  o.argv.insert(o.argv.end(), run.extra_args.begin(), run.extra_args.end());
  o.duration_s = run.timeout_s;
  if (run.keep_steps) o.keep_steps = run.keep_steps;
  if (run.window_s >= 0) o.window_s = run.window_s;
  pid_t job = -1;
  if (run.attach || run.attach_after_s > 0) {
    std::vector<std::string> args = {"/bin/sh", "-c", "sleep 4; exec \"$@\"", "sh"};
    if (run.attach_after_s > 0) args.clear();
    args.insert(args.end(), o.argv.begin(), o.argv.end());
    job = spawn(args);
    if (job < 0) {
      *err = "could not start the job";
      return false;
    }
    o.argv.clear();
    o.command = CommandKind::attach;
    o.target.pids = {static_cast<uint32_t>(job)};
    if (run.attach_after_s > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(run.attach_after_s * 1000)));
  }
  auto s = Session::start(o);
  if (!s) {
    *err = s.error().message;
    if (job > 0) ::kill(job, SIGKILL), ::waitpid(job, nullptr, 0);
    return false;
  }
  if (auto st = (*s)->run_loop(nullptr); !st) {
    *err = st.error().message;
    return false;
  }
  auto rep = (*s)->finish();
  if (!rep) {
    *err = rep.error().message;
    return false;
  }
  out->report = std::move(*rep);
  if (job > 0) {
    int status = 0;
    ::waitpid(job, &status, 0);
    out->report.job_exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  if (out->report.job_exit_code != 0) {
    *err = fmt::format("trainsim exited with {}", out->report.job_exit_code);
    return false;
  }
  auto t = tr::load(truth_path, err);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!t) return false;
  out->truth = std::move(*t);
  tr::CompareOptions copt;
  copt.from_tracer_start = run.attach_after_s > 0;
  out->cmp = tr::compare(out->truth, to_tracer_result(out->report.job, &out->report.analysis.timeline), copt);

  // The truth's window verdict: the largest mean share over counted steps of
  // all ranks (attached late: over the steps compared, those from the
  // tracer's first counted step of the rank on).
  std::vector<const tr::Step*> steps;
  for (const auto& r : out->truth.rank_data) {
    int64_t from = INT64_MIN;
    if (copt.from_tracer_start) {
      from = INT64_MAX;
      for (const auto& rr : out->report.job.ranks)
        if (static_cast<int>(rr.pid) == r.pid && rr.steps.size() > 1) from = static_cast<int64_t>(rr.steps[1].start_ns);
    }
    for (size_t i = 1; i < r.steps.size(); ++i)
      if (r.steps[i].start_ns + (r.steps[i].end_ns - r.steps[i].start_ns) / 2 >= from) steps.push_back(&r.steps[i]);
  }
  // Time-weighted, as the verdict weighs its own shares: a job whose every
  // fourth step waits 170 ms for a burst of batches spends most of its time
  // loading data even if most steps are short ones that wait for a CPU (the
  // mean of per-step shares called that one contention).
  std::map<std::string, double> shares;
  double total = 0;
  for (const tr::Step* st : steps) {
    total += static_cast<double>(st->duration_ns());
    for (const auto& [c, ns] : st->breakdown) shares[c] += static_cast<double>(ns);
  }
  for (auto& [c, v] : shares) v = total > 0 ? v / total : 0;
  out->truth_time_shares = shares;
  double best = -1;
  for (const auto& [c, v] : shares)
    if (v > best) {
      best = v;
      out->truth_gating = c;
    }
  out->tracer_verdict = std::string(category_name(out->report.job.verdict.category));
  auto knobs = nlohmann::json::parse(out->truth.knobs_json, nullptr, false);
  if (knobs.is_object()) out->truth_straggler = knobs.value("straggler_rank", -1);
  int sr = out->report.job.verdict.straggler_rank;
  if (sr >= 0 && sr < static_cast<int>(out->report.job.ranks.size())) {
    uint32_t pid = out->report.job.ranks[static_cast<size_t>(sr)].pid;
    for (const auto& r : out->truth.rank_data)
      if (static_cast<uint32_t>(r.pid) == pid) out->tracer_straggler_pid_rank = r.rank;
  }
  return true;
}

}  // namespace steptrace::accuracy
