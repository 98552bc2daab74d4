// SPDX-License-Identifier: Apache-2.0
// The /proc/PID/maps parser behind runtime-library discovery. Alone in this
// file so the fuzzer (tools/fuzz/run-parsers.sh) links it without the session.
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "session/lib_probes.h"

namespace steptrace {
namespace {

bool is_probe_lib(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  return base.rfind("libnrt.so", 0) == 0 || base.rfind("libsteptrace_marker.so", 0) == 0;
}

// "start-end perms offset major:minor inode   /path" -> the fields after
// the path's '/'; false for a line that is not of that form.
bool parse_maps_line(const std::string& line, MappedLib& out) {
  size_t slash = line.find('/');
  if (slash == std::string::npos) return false;
  out.path = line.substr(slash);
  const char* p = line.c_str();
  char* e = nullptr;
  std::strtoull(p, &e, 16);
  if (*e != '-') return false;
  std::strtoull(e + 1, &e, 16);
  if (*e != ' ') return false;
  out.range = line.substr(0, static_cast<size_t>(e - p));
  // perms, offset
  for (int field = 0; field < 2; ++field) {
    while (*e == ' ') ++e;
    while (*e && *e != ' ') ++e;
  }
  while (*e == ' ') ++e;
  out.dev_major = static_cast<uint32_t>(std::strtoul(e, &e, 16));
  if (*e != ':') return false;
  out.dev_minor = static_cast<uint32_t>(std::strtoul(e + 1, &e, 16));
  if (*e != ' ') return false;
  out.inode = std::strtoull(e, &e, 10);
  return e <= line.c_str() + slash;
}

}  // namespace

std::vector<MappedLib> find_mapped_probe_libs(const std::string& maps) {
  std::map<std::string, MappedLib> out;  // by path: a library maps several segments
  size_t pos = 0;
  while (pos < maps.size()) {
    size_t nl = maps.find('\n', pos);
    std::string line = maps.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? maps.size() : nl + 1;
    MappedLib m;
    if (!parse_maps_line(line, m)) continue;
    if (m.path.size() > 10 && m.path.compare(m.path.size() - 10, 10, " (deleted)") == 0) continue;
    if (is_probe_lib(m.path)) out.emplace(m.path, std::move(m));
  }
  std::vector<MappedLib> v;
  for (auto& [path, m] : out) v.push_back(std::move(m));
  return v;
}

std::vector<std::string> find_probe_libs(const std::string& maps) {
  std::set<std::string> out;
  size_t pos = 0;
  while (pos < maps.size()) {
    size_t nl = maps.find('\n', pos);
    std::string line = maps.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? maps.size() : nl + 1;
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) continue;
    if (is_probe_lib(path)) out.insert(path);
  }
  return {out.begin(), out.end()};
}

}  // namespace steptrace
