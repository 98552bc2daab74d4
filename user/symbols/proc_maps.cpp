// SPDX-License-Identifier: Apache-2.0
#include "symbols/proc_maps.h"

#include <charconv>
#include <optional>

namespace steptrace::symbols {
namespace {

// The next space-separated field of `rest` (which is advanced past it).
std::string_view next_field(std::string_view& rest) {
  size_t b = rest.find_first_not_of(' ');
  if (b == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(b);
  size_t e = rest.find(' ');
  std::string_view f = rest.substr(0, e);
  rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e);
  return f;
}

template <typename T>
bool to_num(std::string_view s, int base, T& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

// "a-b" or "a:b" in hex.
template <typename T>
bool hex_pair(std::string_view s, char sep, T& a, T& b) {
  size_t d = s.find(sep);
  return d != std::string_view::npos && to_num(s.substr(0, d), 16, a) && to_num(s.substr(d + 1), 16, b);
}

bool valid_perms(std::string_view p) {
  return p.size() == 4 && (p[0] == 'r' || p[0] == '-') && (p[1] == 'w' || p[1] == '-') &&
         (p[2] == 'x' || p[2] == '-') && (p[3] == 'p' || p[3] == 's');
}

std::optional<MapEntry> parse_line(std::string_view line, bool& executable) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::string_view rest = line;
  MapEntry m;
  std::string_view range = next_field(rest), perms = next_field(rest), off = next_field(rest);
  std::string_view dev = next_field(rest), inode = next_field(rest);
  if (!hex_pair(range, '-', m.start, m.end) || m.end <= m.start || !valid_perms(perms)) return std::nullopt;
  if (!to_num(off, 16, m.pgoff) || !hex_pair(dev, ':', m.dev_major, m.dev_minor) || !to_num(inode, 10, m.inode))
    return std::nullopt;
  executable = perms[2] == 'x';
  // The path starts after the padding and runs to the end of the line.
  size_t b = rest.find_first_not_of(' ');
  std::string_view path = b == std::string_view::npos ? std::string_view{} : rest.substr(b);
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted) {
    m.deleted = true;
    path.remove_suffix(kDeleted.size());
  }
  m.path = std::string(path);
  return m;
}

}  // namespace

std::vector<MapEntry> parse_proc_maps(std::string_view text) {
  std::vector<MapEntry> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    bool executable = false;
    auto m = parse_line(line, executable);
    if (m && executable) out.push_back(std::move(*m));
  }
  return out;
}

}  // namespace steptrace::symbols
