// SPDX-License-Identifier: Apache-2.0
#include "util/sys_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <set>

namespace steptrace {

std::optional<std::string> read_small_file(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (out.size() > limit) out.resize(limit);
  return out;
}

static std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint32_t> parse_proc_devices_char_major(std::string_view text, std::string_view name) {
  // Format: "Character devices:\n  1 mem\n ...\n\nBlock devices:\n..."
  bool in_char = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    line = trim(line);
    if (line == "Character devices:") {
      in_char = true;
      continue;
    }
    if (line == "Block devices:") {
      in_char = false;
      continue;
    }
    if (!in_char || line.empty()) continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    uint32_t major = 0;
    auto num = line.substr(0, sp);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), major);
    if (ec != std::errc{} || p != num.data() + num.size()) continue;
    if (trim(line.substr(sp + 1)) == name) return major;
  }
  return std::nullopt;
}

std::vector<uint32_t> parse_pid_list(std::string_view text) {
  std::vector<uint32_t> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec == std::errc{} && p == line.data() + line.size() && v != 0) out.push_back(v);
  }
  return out;
}

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest = text.substr(close + 2);  // "S 1 1234 ..."
  ProcStat st;
  st.state = rest.front();
  rest.remove_prefix(1);
  uint32_t fields[2] = {};
  for (uint32_t& f : fields) {
    if (rest.empty() || rest.front() != ' ') return std::nullopt;
    rest.remove_prefix(1);
    // ppid is 0 for the kernel's own roots; anything non-numeric is malformed.
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), f);
    if (ec != std::errc{}) return std::nullopt;
    rest.remove_prefix(static_cast<size_t>(p - rest.data()));
  }
  st.ppid = fields[0];
  st.pgrp = fields[1];
  return st;
}

std::vector<uint32_t> descendants_in(const std::map<uint32_t, uint32_t>& parent_of,
                                     const std::vector<uint32_t>& roots) {
  std::map<uint32_t, std::vector<uint32_t>> children;
  for (const auto& [pid, ppid] : parent_of)
    if (ppid != pid) children[ppid].push_back(pid);
  std::vector<uint32_t> out;
  std::set<uint32_t> seen(roots.begin(), roots.end());
  std::vector<uint32_t> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    uint32_t p = todo.back();
    todo.pop_back();
    auto it = children.find(p);
    if (it == children.end()) continue;
    for (uint32_t c : it->second)
      if (seen.insert(c).second) {
        out.push_back(c);
        todo.push_back(c);
      }
  }
  return out;
}

std::map<uint32_t, ProcStat> SysRoot::processes() const {
  std::map<uint32_t, ProcStat> out;
  DIR* d = ::opendir(proc_.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    uint32_t pid = 0;
    const char* n = e->d_name;
    auto [p, ec] = std::from_chars(n, n + std::strlen(n), pid);
    if (ec != std::errc{} || *p != '\0' || pid == 0) continue;
    auto text = read_small_file(proc_ + "/" + n + "/stat", 4096);
    if (!text) continue;  // gone since the listing
    if (auto st = parse_proc_stat(*text)) out[pid] = *st;
  }
  ::closedir(d);
  return out;
}

std::vector<uint32_t> SysRoot::descendants_of(const std::vector<uint32_t>& roots) const {
  std::map<uint32_t, uint32_t> parent_of;
  for (const auto& [pid, ps] : processes()) parent_of[pid] = ps.ppid;
  return descendants_in(parent_of, roots);
}

std::optional<uint32_t> SysRoot::char_major(std::string_view name) const {
  auto text = read_small_file(proc_ + "/devices");
  if (!text) return std::nullopt;
  return parse_proc_devices_char_major(*text, name);
}

bool SysRoot::pid_exists(uint32_t pid) const {
  if (pid == 0) return false;
  return ::access((proc_ + "/" + std::to_string(pid)).c_str(), F_OK) == 0;
}

std::optional<std::string> SysRoot::thread_comm(uint32_t pid, uint32_t tid) const {
  auto s = read_small_file(proc_ + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm", 64);
  if (!s) return std::nullopt;
  return std::string(trim(*s));
}

std::vector<uint32_t> SysRoot::threads_of(uint32_t pid) const {
  std::vector<uint32_t> out;
  std::string dir = proc_ + "/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    uint32_t tid = 0;
    const char* n = e->d_name;
    auto [p, ec] = std::from_chars(n, n + std::strlen(n), tid);
    if (ec == std::errc{} && *p == '\0') out.push_back(tid);
  }
  ::closedir(d);
  return out;
}

}  // namespace steptrace
