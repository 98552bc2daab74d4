// SPDX-License-Identifier: Apache-2.0
// Reading /proc and /sys through one configurable root, so tests can point
// every parser at a fake tree (and fuzz it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace steptrace {

struct ProcStat {
  char state = '?';
  uint32_t ppid = 0;
  uint32_t pgrp = 0;
};

class SysRoot {
 public:
  explicit SysRoot(std::string proc = "/proc", std::string sys = "/sys")
      : proc_(std::move(proc)), sys_(std::move(sys)) {}

  const std::string& proc() const { return proc_; }
  const std::string& sys() const { return sys_; }

  // Char-device major registered under `name` in /proc/devices.
  std::optional<uint32_t> char_major(std::string_view name) const;
  bool pid_exists(uint32_t pid) const;
  std::optional<std::string> thread_comm(uint32_t pid, uint32_t tid) const;
  std::vector<uint32_t> threads_of(uint32_t pid) const;
  // Every process now, from /proc/PID/stat.
  std::map<uint32_t, ProcStat> processes() const;
  // The live descendants of `roots` (children, grandchildren, ...), roots excluded.
  std::vector<uint32_t> descendants_of(const std::vector<uint32_t>& roots) const;

 private:
  std::string proc_;
  std::string sys_;
};

// Pure parsers, separated from the file reads so they can be unit-tested and fuzzed.
std::optional<uint32_t> parse_proc_devices_char_major(std::string_view text, std::string_view name);
std::vector<uint32_t> parse_pid_list(std::string_view text);  // cgroup.procs format
// /proc/PID/stat: the comm may hold spaces and parentheses, so the fields are
// read after the last ')'.
std::optional<ProcStat> parse_proc_stat(std::string_view text);
// The descendants of `roots` in a pid -> parent map, roots excluded, each once.
std::vector<uint32_t> descendants_in(const std::map<uint32_t, uint32_t>& parent_of,
                                     const std::vector<uint32_t>& roots);

std::optional<std::string> read_small_file(const std::string& path, size_t limit = 1 << 20);

}  // namespace steptrace
