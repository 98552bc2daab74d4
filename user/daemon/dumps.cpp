// SPDX-License-Identifier: Apache-2.0
// Flight-recorder captures: on SIGUSR1, POST /dump (rate-limited) and slow
// steps, into a directory that must be ours alone; the newest few are kept.
#include "daemon/daemon_impl.h"

#include <fmt/core.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

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

nlohmann::json Daemon::capture_meta(const std::string& reason) const {
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
  return {{"host", host_},
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
          {"dump_reason", reason},
          {"realtime_minus_monotonic_ns", static_cast<int64_t>(real_ns - now)},
          {"window_start_ns", now > keep ? now - keep : 0}};
}

Result<std::string> Daemon::dump(const std::string& reason) {
  if (auto s = prepare_dump_dir(); !s) {
    ++dump_failures_;
    return s.error();
  }
  char ts[32];
  time_t t = ::time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  std::strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
  std::string base = fmt::format("{}/steptrace-{}-{}-{}", cfg_.dump_dir, host_, ts, reason);
  std::string path = base + ".cap";
  for (int i = 1; ::access(path.c_str(), F_OK) == 0 && i < 100; ++i) path = fmt::format("{}-{}.cap", base, i);
  auto st = flight_.dump(path, capture_meta(reason), cumulative_drops(), monotonic_ns());
  if (!st) {
    ++dump_failures_;
    return st.error();
  }
  ++dumps_ok_[reason];
  log::info("flight recorder: wrote {} ({} records)", path, flight_.records());
  // Keep the newest kMaxDumpFiles captures.
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cfg_.dump_dir, ec)) {
    auto name = e.path().filename().string();
    if (name.rfind("steptrace-", 0) == 0 && e.path().extension() == ".cap" && e.is_regular_file(ec))
      files.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + kMaxDumpFiles < files.size(); ++i) std::filesystem::remove(files[i].second, ec);
  return path;
}

void Daemon::handle_dumps() {
  auto manual = [this](const std::string& reason) -> std::pair<int, std::string> {
    if (now_s() - last_manual_dump_s_ < kManualDumpMinS) {
      ++dump_failures_;
      return {429, fmt::format("rate-limited: one dump per {} s", kManualDumpMinS)};
    }
    last_manual_dump_s_ = now_s();
    auto r = dump(reason);
    if (!r) {
      log::error("flight recorder dump failed: {}", r.error().message);
      return {500, r.error().message};
    }
    return {200, *r};
  };
  if (g_dump.exchange(false)) {
    auto [code, msg] = manual("signal");
    if (code == 429) log::warn("SIGUSR1: {}", msg);
  }
  for (auto& req : http_.take_dump_requests()) {
    auto [code, msg] = manual(req->reason);
    http_.answer(*req, code, msg);
  }
}

}  // namespace steptrace::daemon
