// SPDX-License-Identifier: Apache-2.0
// Flight-recorder captures: on SIGUSR1 and the control socket's `dump`
// (manual: at most one per dump_min_interval_seconds) and on slow steps
// (automatic: the same interval, counted apart), into a directory that must
// be ours alone. The main loop copies the flight recorder; the dump worker
// compresses and writes the copy and keeps the newest few of each trigger.
#include "daemon/daemon_impl.h"

#include <fmt/core.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "capture/user_note.h"
#include "pipeline/clock_notes.h"
#include "util/log.h"

namespace steptrace::daemon {

Status Daemon::prepare_dump_dir() {
  std::error_code ec;
  std::filesystem::path dir(cfg_.dump_dir);
  if (!std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) {
    std::filesystem::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return make_error(fmt::format("cannot create dump directory {}: {}", cfg_.dump_dir, std::strerror(errno)));
  }
  // The directory may be reached through a symlink (systemd's DynamicUser puts
  // StateDirectory in /var/lib/private); what it resolves to must be ours alone.
  // Files inside are created O_EXCL|O_NOFOLLOW and renamed into place.
  auto real = std::filesystem::canonical(dir, ec);
  if (ec) return make_error(fmt::format("dump directory {}: {}", cfg_.dump_dir, ec.message()));
  struct stat st {};
  if (::lstat(real.c_str(), &st) != 0) return make_error(fmt::format("dump directory {}: {}", cfg_.dump_dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) return make_error(fmt::format("dump directory {} is not a directory", cfg_.dump_dir));
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWOTH | S_IWGRP)))
    return make_error(fmt::format("dump directory {} must be owned by us and writable by nobody else", cfg_.dump_dir));
  return Ok{};
}

nlohmann::json Daemon::capture_meta(const std::string& trigger, const std::string& note) const {
  struct timespec rt {};
  clock_gettime(CLOCK_REALTIME, &rt);
  uint64_t real_ns = static_cast<uint64_t>(rt.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(rt.tv_nsec);
  nlohmann::json tiers = nlohmann::json::object();
  if (tracer_)
    for (const auto& t : tracer_->tiers()) tiers[t.collector] = t.tier;
  std::vector<uint32_t> pids;
  for (const auto& [pid, id] : tracked_) pids.push_back(pid);
  uint64_t now = monotonic_ns();
  uint64_t keep = static_cast<uint64_t>(cfg_.flight_seconds * 1e9);
  nlohmann::json m = {{"host", host_},
                      {"kernel", features_.release},
                      {"abi_version", ST_ABI_VERSION},
                      {"argv", nlohmann::json::array()},
                      {"pids", pids},
                      {"accel_devs", cfg_.accel_devs},
                      {"subsystems", active_subsystems_},
                      {"ring_mib", cfg_.ring_mib},
                      {"drain_ms", drain_ms_},
                      {"attach_tiers", tiers},
                      {"source", "steptrace daemon flight recorder"},
                      {"dump_reason", trigger},
                      {"realtime_minus_monotonic_ns", static_cast<int64_t>(real_ns - now)},
                      {"window_start_ns", now > keep ? now - keep : 0}};
  // The operator's words (`steptrace ctl dump REASON`): metadata only, never the file name.
  if (!note.empty()) m["dump_note"] = note;
  return m;
}

void Daemon::keep_clock_anchor(uint64_t now) {
  if (now < next_anchor_ns_) return;
  next_anchor_ns_ = now + kClockAnchorEveryNs;
  anchors_.push_back(take_clock_anchor());
  // As far back as the flight recorder keeps records, and one before that.
  const uint64_t keep = static_cast<uint64_t>(cfg_.flight_seconds * 1e9) + kClockAnchorEveryNs;
  while (anchors_.size() > 2 && anchors_.front().mono_ns + keep < now) anchors_.pop_front();
}

Status Daemon::start_dump(const std::string& trigger, const std::string& note, std::shared_ptr<ControlRequest> waiter) {
  if (dump_worker_.busy()) {
    ++dump_failures_;
    return make_error("busy: a capture is being written");
  }
  if (auto s = prepare_dump_dir(); !s) {
    ++dump_failures_;
    return s.error();
  }
  char ts[32];
  time_t t = ::time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  std::strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
  std::string base = fmt::format("{}/steptrace-{}-{}-{}", cfg_.dump_dir, host_, ts, trigger);
  std::string path = base + ".cap";
  for (int i = 1; ::access(path.c_str(), F_OK) == 0 && i < 100; ++i) path = fmt::format("{}-{}.cap", base, i);
  DumpJob job;
  job.trigger = trigger;
  job.path = path;
  job.dump_dir = cfg_.dump_dir;
  job.snapshot = flight_.snapshot();  // a memcpy of at most flight_recorder_mib, on this thread
  // The device counters of the span first (stamped at its start), then the
  // anchors of the span it holds before its records, one taken now after them.
  const uint64_t now = monotonic_ns();
  const uint64_t keep = static_cast<uint64_t>(cfg_.flight_seconds * 1e9);
  job.head_notes = signal_notes(anchors_.empty() ? (now > keep ? now - keep : 0) : anchors_.front().mono_ns, now);
  for (const auto& a : anchors_) job.head_notes.push_back(make_user_note(a.mono_ns, 0, clock_note(a)));
  const ClockAnchor last = take_clock_anchor();
  job.tail_notes.push_back(make_user_note(last.mono_ns, 0, clock_note(last)));
  job.meta = capture_meta(trigger, note);
  job.drops = cumulative_drops();
  job.end_ns = monotonic_ns();
  log::info("flight recorder: writing {} ({} records) on the dump worker", path, job.snapshot.records);
  if (!dump_worker_.submit(std::move(job))) {
    ++dump_failures_;
    return make_error("the dump worker is not running");
  }
  dump_waiter_ = std::move(waiter);
  return Ok{};
}

void Daemon::finish_dump(const DumpOutcome& o) {
  if (o.error.empty()) {
    ++dumps_ok_[o.trigger];
    log::info("flight recorder: wrote {} ({} records, {:.2f} s)", o.path, o.records, o.seconds);
  } else {
    ++dump_failures_;
    log::error("flight recorder dump failed: {}", o.error);
  }
  if (dump_waiter_) {
    bool ok = o.error.empty();
    control_.answer(*dump_waiter_, ok, ok ? o.path : o.error);
    dump_waiter_.reset();
  }
}

Status Daemon::request_manual_dump(const std::string& trigger, const std::string& note,
                                   std::shared_ptr<ControlRequest> waiter) {
  double since = now_s() - last_manual_dump_s_;
  if (since < cfg_.dump_min_interval_s) {
    ++dump_failures_;
    return make_error(fmt::format("rate-limited: one requested dump per {:g} s (dump_min_interval_seconds), "
                                  "the next in {:.0f} s",
                                  cfg_.dump_min_interval_s, std::ceil(cfg_.dump_min_interval_s - since)));
  }
  if (auto s = start_dump(trigger, note, std::move(waiter)); !s) return s;
  last_manual_dump_s_ = now_s();
  return Ok{};
}

void Daemon::handle_dumps() {
  if (auto o = dump_worker_.take_outcome()) finish_dump(*o);
  if (g_dump.exchange(false)) {
    if (auto s = request_manual_dump("signal", "", nullptr); !s) log::warn("SIGUSR1: {}", s.error().message);
  }
}

}  // namespace steptrace::daemon
