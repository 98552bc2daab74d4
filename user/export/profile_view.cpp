// SPDX-License-Identifier: Apache-2.0
#include "export/profile_view.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>

namespace steptrace {

std::string frame_name(const SampleStore& store, uint32_t pid, uint64_t ip, bool kernel) {
  if (const std::string* n = store.name_of(kernel ? 0 : pid, ip)) return kernel ? *n + "_[k]" : *n;
  return kernel ? fmt::format("0x{:x}_[k]", ip) : fmt::format("0x{:x}", ip);
}

std::vector<std::string> stack_frames(const SampleStore& store, const SampledStack& s) {
  std::vector<std::string> frames;
  auto native_from = [&](size_t k) {  // user frames [0, k), root first
    for (size_t i = k; i-- > 0;) frames.push_back(frame_name(store, s.pid, s.user[i], false));
  };
  if (!s.python.empty()) {
    // The interpreter's own frames say nothing a Python frame does not: the
    // Python stack, then the native code it called (below the innermost
    // evaluation loop: a C extension, the allocator, a syscall wrapper).
    if (s.flags & ST_SAMPLE_PYTHON_TRUNCATED) frames.push_back("[truncated]");
    for (auto it = s.python.rbegin(); it != s.python.rend(); ++it) {
      const std::string* n = store.name_of(s.pid, *it);
      frames.push_back(n ? *n : fmt::format("[python code 0x{:x}]", *it));
    }
    size_t k = s.user.size();
    for (size_t i = 0; i < s.user.size(); ++i) {
      const std::string* n = store.name_of(s.pid, s.user[i]);
      if (n && n->rfind("_PyEval_EvalFrame", 0) == 0) {
        k = i;
        break;
      }
    }
    native_from(k);
  } else {
    if (s.flags & ST_SAMPLE_USER_TRUNCATED) frames.push_back("[truncated]");
    native_from(s.user.size());
  }
  for (auto it = s.kernel.rbegin(); it != s.kernel.rend(); ++it) frames.push_back(frame_name(store, s.pid, *it, true));
  if (frames.empty()) frames.push_back("[no stack]");
  return frames;
}

std::vector<NamedStack> named_stacks(const SessionReport& r) {
  const SampleStore& store = r.analysis.samples;
  std::map<std::tuple<uint8_t, uint8_t, std::vector<std::string>>, uint64_t> merged;
  for (const auto& [key, n] : r.job.profile.counts()) {
    const auto [cat, role, id] = key;
    std::vector<std::string> frames;
    if (id == SampleStore::kOverflowStack || id >= store.stacks().size())
      frames.push_back("[stack table full]");
    else
      frames = stack_frames(store, store.stacks()[id]);
    merged[{cat, role, std::move(frames)}] += n;
  }
  std::vector<NamedStack> out;
  out.reserve(merged.size());
  for (auto& [k, n] : merged)
    out.push_back({static_cast<Category>(std::get<0>(k)), static_cast<SampleRole>(std::get<1>(k)), std::get<2>(k), n});
  std::stable_sort(out.begin(), out.end(), [](const NamedStack& a, const NamedStack& b) { return a.samples > b.samples; });
  return out;
}

std::string folded_text(const std::vector<NamedStack>& stacks) {
  std::string o;
  auto clean = [](std::string s) {
    // flamegraph.pl splits frames on ';' and the count on the last space.
    for (char& ch : s)
      if (ch == ';' || ch == '\n') ch = ':';
    return s;
  };
  for (const auto& s : stacks) {
    o += category_name(s.category);
    o += ';';
    o += clean(sample_role_name(s.role));
    for (const auto& f : s.frames) o += ';' + clean(f);
    o += fmt::format(" {}\n", s.samples);
  }
  return o;
}

namespace {

struct Group {
  Category category;
  SampleRole role;
  uint64_t samples = 0;
};

std::vector<Group> groups_of(const std::vector<NamedStack>& stacks) {
  std::map<std::pair<uint8_t, uint8_t>, uint64_t> g;
  for (const auto& s : stacks) g[{static_cast<uint8_t>(s.category), static_cast<uint8_t>(s.role)}] += s.samples;
  std::vector<Group> out;
  for (const auto& [k, n] : g) out.push_back({static_cast<Category>(k.first), static_cast<SampleRole>(k.second), n});
  std::stable_sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.samples > b.samples; });
  return out;
}

uint64_t total_of(const std::vector<NamedStack>& stacks) {
  uint64_t t = 0;
  for (const auto& s : stacks) t += s.samples;
  return t;
}

}  // namespace

std::vector<FunctionShare> top_functions(const std::vector<NamedStack>& stacks, Category c, SampleRole role,
                                         size_t limit) {
  std::map<std::string, uint64_t> incl;
  std::map<std::string, std::map<std::string, uint64_t>> next;  // function -> what it runs next (callee or itself)
  uint64_t total = 0;
  for (const auto& s : stacks) {
    if (s.category != c || s.role != role) continue;
    total += s.samples;
    std::set<std::string_view> seen;  // a recursive function counts once per sample
    for (size_t i = 0; i < s.frames.size(); ++i) {
      const std::string& f = s.frames[i];
      if (f.empty() || f[0] == '[' || !seen.insert(f).second) continue;
      incl[f] += s.samples;
      next[f][i + 1 < s.frames.size() ? s.frames[i + 1] : std::string()] += s.samples;
    }
  }
  std::vector<FunctionShare> out;
  for (const auto& [f, n] : incl) {
    // A frame that hands nearly all its time to one callee that runs for
    // nobody else (main, a thread's entry, a wrapper) says nothing its callee
    // does not: left out. One that shares its callee with others (two named
    // phases calling one kernel) is what tells them apart: kept.
    uint64_t most = 0;
    std::string callee;
    for (const auto& [g, k] : next[f])
      if (k > most) most = k, callee = g;
    if (!callee.empty() && most * 100 >= n * 95 && incl[callee] * 100 <= n * 105) continue;
    out.push_back({f, n, total ? static_cast<double>(n) / static_cast<double>(total) : 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const FunctionShare& a, const FunctionShare& b) {
    return a.samples > b.samples;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

nlohmann::json profile_json(const SessionReport& r, const std::vector<NamedStack>& stacks) {
  using nlohmann::json;
  const uint64_t total = total_of(stacks);
  json groups = json::array();
  for (const auto& g : groups_of(stacks)) {
    json fns = json::array(), top = json::array();
    for (const auto& f : top_functions(stacks, g.category, g.role, 10))
      fns.push_back({{"function", f.function}, {"samples", f.samples}, {"share", f.share}});
    for (const auto& s : stacks) {
      if (s.category != g.category || s.role != g.role) continue;
      top.push_back({{"frames", s.frames},
                     {"samples", s.samples},
                     {"share", static_cast<double>(s.samples) / static_cast<double>(g.samples)}});
      if (top.size() >= 5) break;
    }
    groups.push_back({{"category", std::string(category_name(g.category))},
                      {"role", sample_role_name(g.role)},
                      {"samples", g.samples},
                      {"share", total ? static_cast<double>(g.samples) / static_cast<double>(total) : 0.0},
                      {"top_functions", fns},
                      {"top_stacks", top}});
  }
  const SampleStore& store = r.analysis.samples;
  return {{"samples", total},
          {"distinct_stacks", store.stacks().size() - 1},
          {"stacks_over_cap", store.overflowed()},
          {"malformed", store.malformed()},
          {"symbolized", !store.names().empty()},
          {"groups", groups}};
}

std::string profile_text(const SessionReport& r, const std::vector<NamedStack>& stacks) {
  const uint64_t total = total_of(stacks);
  if (total == 0) return {};
  std::string o = fmt::format("\nIn which code (on-CPU stack samples: {}{})\n", total,
                              r.analysis.samples.names().empty() ? ", not symbolized" : "");
  size_t shown = 0;
  for (const auto& g : groups_of(stacks)) {
    const double share = static_cast<double>(g.samples) / static_cast<double>(total);
    if (shown >= 6 || (shown > 0 && share < 0.02)) break;
    ++shown;
    o += fmt::format("  {:>5.1f}%  {} ({})\n", 100.0 * share, category_name(g.category), sample_role_name(g.role));
    std::string line;
    for (const auto& f : top_functions(stacks, g.category, g.role, 4))
      line += fmt::format("{}{} {:.0f}%", line.empty() ? "" : " | ", f.function, 100.0 * f.share);
    if (!line.empty()) o += "          " + line + "\n";
  }
  return o;
}

}  // namespace steptrace
