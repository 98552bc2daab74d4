// SPDX-License-Identifier: Apache-2.0
#include "signals/numa_topology.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace steptrace::signals {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool parse_int(std::string_view s, int& v, int base = 10) {
  if (base == 16 && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_neuron_device_id(int id) {
  // trn1, inf2, trn2, inf1 (neuron.md: neuron_device.h).
  return id == 0x7164 || id == 0x7264 || id == 0x7364 || (id >= 0x7064 && id <= 0x7067);
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view s) {
  std::vector<int> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view part = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    size_t dash = part.find('-');
    int a = 0, b = 0;
    if (dash == std::string_view::npos) {
      if (parse_int(part, a) && a >= 0) out.push_back(a);
    } else if (parse_int(part.substr(0, dash), a) && parse_int(part.substr(dash + 1), b) && a >= 0 && b >= a &&
               b - a < 65536) {
      for (int c = a; c <= b; ++c) out.push_back(c);
    }
  }
  return out;
}

NumaTopology read_numa_topology(const std::string& sysfs_root) {
  NumaTopology t;
  const std::string nodes = sysfs_root + "/devices/system/node";
  for (const auto& name : entries(nodes)) {
    int node = 0;
    if (name.rfind("node", 0) != 0 || !parse_int(std::string_view(name).substr(4), node) || node < 0) continue;
    ++t.nodes;
    for (int cpu : parse_cpu_list(read_line(nodes + "/" + name + "/cpulist"))) {
      if (cpu >= 65536) continue;
      if (static_cast<size_t>(cpu) >= t.cpu_node.size()) t.cpu_node.resize(static_cast<size_t>(cpu) + 1, -1);
      t.cpu_node[static_cast<size_t>(cpu)] = node;
    }
  }
  const std::string pci = sysfs_root + "/bus/pci/devices";
  int index = 0;
  for (const auto& bdf : entries(pci)) {
    int vendor = 0, device = 0;
    if (!parse_int(read_line(pci + "/" + bdf + "/vendor"), vendor, 16) || vendor != 0x1d0f) continue;
    if (!parse_int(read_line(pci + "/" + bdf + "/device"), device, 16) || !is_neuron_device_id(device)) continue;
    int node = -1;
    if (parse_int(read_line(pci + "/" + bdf + "/numa_node"), node) && node >= 0) t.device_node[index] = node;
    t.device_bdf[index] = bdf;
    ++index;
  }
  return t;
}

}  // namespace steptrace::signals
