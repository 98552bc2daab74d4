// SPDX-License-Identifier: Apache-2.0
#include "loader/dev_files.h"

#include <fmt/core.h>
#include <sys/stat.h>

#include <filesystem>

#include "loader/tracer.h"
#include "util/log.h"

namespace steptrace {

DevFileSet::DevFileSet(const std::vector<std::string>& accel, const std::vector<std::string>& rdma) {
  for (size_t i = 0; i < accel.size(); ++i) files_.push_back({accel[i], false, static_cast<uint32_t>(i), false});
  for (size_t i = 0; i < rdma.size(); ++i) files_.push_back({rdma[i], true, static_cast<uint32_t>(i), false});
}

bool DevFileSet::has_rdma() const {
  for (const auto& f : files_)
    if (f.rdma) return true;
  return false;
}

bool DevFileSet::pending() const {
  for (const auto& f : files_)
    if (!f.resolved) return true;
  return false;
}

std::vector<std::string> DevFileSet::pending_paths() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    if (!f.resolved) out.push_back(f.path);
  return out;
}

Status DevFileSet::validate() const {
  for (const auto& f : files_) {
    struct stat st {};
    if (::stat(f.path.c_str(), &st) == 0) continue;
    auto parent = std::filesystem::path(f.path).parent_path();
    if (parent.empty()) parent = ".";
    if (!std::filesystem::is_directory(parent))
      return make_error(fmt::format("unknown {} {}: no such file or directory", option(f), f.path));
  }
  return Ok{};
}

Status DevFileSet::resolve(BpfTracer& tracer, bool first_time) {
  for (auto& f : files_) {
    if (f.resolved) continue;
    struct stat st {};
    if (::stat(f.path.c_str(), &st) != 0) {
      if (first_time) log::info("{} {} does not exist yet; watching for it", option(f), f.path);
      continue;
    }
    uint32_t dev = kernel_dev_from_user(st.st_dev);
    if (auto s = tracer.add_accel_dev(dev, st.st_ino, f.index | (f.rdma ? ST_DEV_IS_RDMA : 0u)); !s) return s;
    f.resolved = true;
    log::info("tracing {} device {} (dev {}:{}, inode {})", f.rdma ? "RDMA verbs" : "accelerator", f.path,
              dev >> 20, dev & 0xfffff, st.st_ino);
  }
  return Ok{};
}

std::vector<std::string> DevFileSet::never_appeared() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    if (!f.resolved) out.push_back(fmt::format("{} {} never appeared", option(f), f.path));
  return out;
}

}  // namespace steptrace
