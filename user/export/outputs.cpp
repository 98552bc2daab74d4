// SPDX-License-Identifier: Apache-2.0
#include "export/outputs.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace steptrace {

Status write_text_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return make_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return make_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error(fmt::format("rename {} -> {}: {}", tmp, path, std::strerror(errno)));
  return Ok{};
}

Status write_file_outputs(const Options& o, const SessionReport& r) {
  if (!o.perfetto_path.empty())
    if (auto st = write_text_file(o.perfetto_path, perfetto_trace(r).dump() + "\n"); !st) return st;
  if (!o.html_path.empty())
    if (auto st = write_text_file(o.html_path, html_report(r)); !st) return st;
  return Ok{};
}

}  // namespace steptrace
