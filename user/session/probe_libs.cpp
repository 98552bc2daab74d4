// SPDX-License-Identifier: Apache-2.0
// The /proc/PID/maps parser behind runtime-library discovery. Alone in this
// file so the fuzzer (tools/fuzz/run-parsers.sh) links it without the session.
#include <set>
#include <string>
#include <vector>

namespace steptrace {

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
    std::string base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libnrt.so", 0) == 0 || base.rfind("libsteptrace_marker.so", 0) == 0) out.insert(path);
  }
  return {out.begin(), out.end()};
}

}  // namespace steptrace
