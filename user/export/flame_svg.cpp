// SPDX-License-Identifier: Apache-2.0
#include "export/flame_svg.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>


namespace steptrace {

namespace {

struct Node {
  uint64_t samples = 0;
  std::map<std::string, std::unique_ptr<Node>> children;
};

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

constexpr int kRow = 16;
constexpr int kMaxDepth = 96;

int depth_of(const Node& n) {
  int d = 0;
  for (const auto& [name, c] : n.children) d = std::max(d, 1 + depth_of(*c));
  return std::min(d, kMaxDepth);
}

// Frames narrower than min_w are left out (their samples stay in the parent's width).
void draw(const Node& n, const std::string& name, double x, int depth, int height, double scale, uint64_t total,
          std::string& o) {
  const double w = static_cast<double>(n.samples) * scale;
  if (w < 0.5 || depth >= kMaxDepth) return;
  const int y = height - (depth + 1) * kRow;
  const bool kernel = name.size() > 4 && name.compare(name.size() - 4, 4, "_[k]") == 0;
  // A colour from the name, warm for user code and blue-ish for the kernel.
  const size_t h = std::hash<std::string>{}(name);
  const int r = kernel ? 120 + static_cast<int>(h % 60) : 205 + static_cast<int>(h % 50);
  const int g = kernel ? 150 + static_cast<int>((h >> 8) % 60) : 80 + static_cast<int>((h >> 8) % 120);
  const int b = kernel ? 200 + static_cast<int>((h >> 16) % 55) : 40 + static_cast<int>((h >> 16) % 40);
  const double pct = 100.0 * static_cast<double>(n.samples) / static_cast<double>(total);
  o += fmt::format("<g><title>{} ({} samples, {:.1f}%)</title><rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" "
                   "height=\"{}\" fill=\"rgb({},{},{})\" rx=\"1\"/>",
                   xml_escape(name), n.samples, pct, x, y, std::max(w - 0.5, 0.5), kRow - 1, r, g, b);
  if (w > 40) {
    const size_t chars = static_cast<size_t>((w - 6) / 6.5);
    std::string label = name.size() > chars ? name.substr(0, chars > 2 ? chars - 2 : 0) + ".." : name;
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", x + 3, y + kRow - 4, xml_escape(label));
  }
  o += "</g>\n";
  double cx = x;
  for (const auto& [cn, c] : n.children) {
    draw(*c, cn, cx, depth + 1, height, scale, total, o);
    cx += static_cast<double>(c->samples) * scale;
  }
}

}  // namespace

std::string flame_svg(const std::vector<NamedStack>& stacks, Category c, SampleRole role, int width) {
  Node root;
  for (const auto& s : stacks) {
    if (s.category != c || s.role != role) continue;
    root.samples += s.samples;
    Node* n = &root;
    for (const auto& f : s.frames) {
      auto& child = n->children[f];
      if (!child) child = std::make_unique<Node>();
      child->samples += s.samples;
      n = child.get();
    }
  }
  if (root.samples == 0) return {};
  const int height = (depth_of(root) + 1) * kRow;
  std::string o = fmt::format("<svg class=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                              "font-family=\"monospace\" font-size=\"11\">\n",
                              width, height);
  const std::string all = fmt::format("all: {} ({})", category_name(c), sample_role_name(role));
  draw(root, all, 0, 0, height, static_cast<double>(width) / static_cast<double>(root.samples), root.samples, o);
  o += "</svg>\n";
  return o;
}

std::string profile_html(const SessionReport& r, const std::vector<NamedStack>& stacks) {
  uint64_t total = 0;
  std::map<std::pair<uint8_t, uint8_t>, uint64_t> groups;
  for (const auto& s : stacks) {
    total += s.samples;
    groups[{static_cast<uint8_t>(s.category), static_cast<uint8_t>(s.role)}] += s.samples;
  }
  if (total == 0) return {};
  std::vector<std::pair<uint64_t, std::pair<uint8_t, uint8_t>>> order;
  for (const auto& [k, n] : groups) order.push_back({n, k});
  std::sort(order.rbegin(), order.rend());
  std::string o = fmt::format("<h2>In which code</h2>\n<p id=\"cpu-profile\">{} on-CPU stack samples{}; a flame graph "
                              "per category, root at the bottom (hover a frame for its share).</p>\n",
                              total, r.analysis.samples.names().empty() ? " (not symbolized)" : "");
  size_t shown = 0;
  for (const auto& [n, k] : order) {
    if (shown >= 4 || (shown > 0 && static_cast<double>(n) < 0.02 * static_cast<double>(total))) break;
    ++shown;
    const auto c = static_cast<Category>(k.first);
    const auto role = static_cast<SampleRole>(k.second);
    o += fmt::format("<h3>{} ({}): {:.1f}% of the samples</h3>\n", category_name(c), sample_role_name(role),
                     100.0 * static_cast<double>(n) / static_cast<double>(total));
    o += "<div style=\"overflow-x:auto\">" + flame_svg(stacks, c, role) + "</div>\n";
  }
  return o;
}

}  // namespace steptrace
