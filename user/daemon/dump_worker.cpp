// SPDX-License-Identifier: Apache-2.0
#include "daemon/dump_worker.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <vector>

namespace steptrace::daemon {

DumpWorker::~DumpWorker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DumpWorker::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    // Signals go to the main thread.
    sigset_t set;
    sigfillset(&set);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    loop();
  });
  have_clock_ = pthread_getcpuclockid(thread_.native_handle(), &clock_) == 0;
}

bool DumpWorker::busy() const {
  std::lock_guard<std::mutex> lk(mu_);
  return busy_;
}

bool DumpWorker::submit(DumpJob job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (busy_ || !thread_.joinable()) return false;
    busy_ = true;
    job_ = std::move(job);
  }
  cv_.notify_all();
  return true;
}

std::optional<DumpOutcome> DumpWorker::take_outcome() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!outcome_) return std::nullopt;
  auto o = std::move(outcome_);
  outcome_.reset();
  busy_ = false;
  return o;
}

std::optional<DumpOutcome> DumpWorker::wait_outcome() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!busy_) return std::nullopt;
  cv_.wait(lk, [&] { return outcome_.has_value(); });
  auto o = std::move(outcome_);
  outcome_.reset();
  busy_ = false;
  return o;
}

double DumpWorker::cpu_seconds() const {
  struct timespec ts {};
  if (!have_clock_ || clock_gettime(clock_, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void DumpWorker::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // A capture in hand is finished even when stopping (its request is answered).
    cv_.wait(lk, [&] { return job_.has_value() || stop_; });
    if (!job_) return;
    DumpJob job = std::move(*job_);
    job_.reset();
    lk.unlock();
    auto t0 = std::chrono::steady_clock::now();
    DumpOutcome o;
    o.trigger = job.trigger;
    o.path = job.path;
    o.records = job.snapshot.records;
    if (auto s = FlightRecorder::write_capture(job.path, job.snapshot, job.meta, job.drops, job.end_ns,
                                                 job.head_notes, job.tail_notes); !s)
      o.error = s.error().message;
    job = DumpJob{};  // the snapshot's memory goes back now, not at the next dump
    prune_dumps(o.path.substr(0, o.path.rfind('/')), kMaxDumpFiles);
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    outcome_ = std::move(o);
    cv_.notify_all();
  }
}

std::string dump_trigger_of(std::string_view name) {
  constexpr std::string_view prefix = "steptrace-", ext = ".cap";
  if (name.size() <= prefix.size() + ext.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - ext.size()) != ext)
    return "";
  name.remove_suffix(ext.size());
  auto dash = name.rfind('-');
  if (dash == std::string_view::npos) return "";
  auto tail = name.substr(dash + 1);
  if (!tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    name = name.substr(0, dash);  // the -N of a second capture in the same second
    dash = name.rfind('-');
    if (dash == std::string_view::npos) return "";
  }
  auto trigger = name.substr(dash + 1);
  // ...-YYYYmmddTHHMMSSZ-TRIGGER
  if (trigger.empty() || dash < 17 || name[dash - 1] != 'Z' || name[dash - 8] != 'T') return "";
  for (char c : trigger)
    if (!((c >= 'a' && c <= 'z') || c == '_')) return "";
  return std::string(trigger);
}

void prune_dumps(const std::string& dir, size_t keep) {
  std::map<std::string, std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>>> by_trigger;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    auto trigger = dump_trigger_of(e.path().filename().string());
    if (!trigger.empty() && e.is_regular_file(ec)) by_trigger[trigger].emplace_back(e.last_write_time(ec), e.path());
  }
  for (auto& [trigger, files] : by_trigger) {
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i + keep < files.size(); ++i) std::filesystem::remove(files[i].second, ec);
  }
}

void remove_stale_dump_temps(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    auto name = e.path().filename().string();
    if (name.rfind("steptrace-", 0) == 0 && name.size() > 8 && name.compare(name.size() - 8, 8, ".cap.tmp") == 0 &&
        e.is_regular_file(ec))
      stale.push_back(e.path());
  }
  for (const auto& p : stale) std::filesystem::remove(p, ec);
}

}  // namespace steptrace::daemon
