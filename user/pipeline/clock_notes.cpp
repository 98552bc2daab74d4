// SPDX-License-Identifier: Apache-2.0
#include "pipeline/clock_notes.h"

#include <fmt/core.h>

#include <cstdlib>
#include <limits>

namespace steptrace {

nlohmann::json clock_note(const ClockAnchor& a) {
  nlohmann::json j = {{"note", "clock"}, {"mono_ns", a.mono_ns}, {"real_ns", a.real_ns}, {"bound_ns", a.bound_ns}};
  if (a.wall_max_error_us >= 0) j["wall_max_error_us"] = a.wall_max_error_us;
  if (a.wall_unsynced) j["wall_unsynced"] = true;
  return j;
}

std::optional<ClockAnchor> anchor_in_note(const nlohmann::json& note) {
  auto type = note.find("note");
  if (type == note.end() || *type != "clock") return std::nullopt;
  auto m = note.find("mono_ns"), r = note.find("real_ns"), b = note.find("bound_ns");
  if (m == note.end() || r == note.end() || b == note.end()) return std::nullopt;
  if (!m->is_number_unsigned() || !r->is_number_integer() || !b->is_number_unsigned()) return std::nullopt;
  if (b->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  ClockAnchor a;
  a.mono_ns = m->get<uint64_t>();
  a.real_ns = r->get<int64_t>();
  a.bound_ns = b->get<uint32_t>();
  if (!a.valid()) return std::nullopt;
  // Older captures do not say: the wall clock's error stays unknown.
  if (auto e = note.find("wall_max_error_us"); e != note.end() && e->is_number_integer() && e->get<int64_t>() >= 0)
    a.wall_max_error_us = e->get<int64_t>();
  if (auto u = note.find("wall_unsynced"); u != note.end() && u->is_boolean()) a.wall_unsynced = u->get<bool>();
  return a;
}

nlohmann::json clock_json(const ClockAnchors& c) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : c.steps())
    steps.push_back({{"after_mono_ns", s.after_mono_ns}, {"before_mono_ns", s.before_mono_ns}, {"step_ns", s.step_ns}});
  nlohmann::json j = {{"anchors", c.count()},
                      {"tightest_bound_ns", c.tightest_bound_ns()},
                      {"widest_bound_ns", c.widest_bound_ns()},
                      {"wall_clock_steps", steps},
                      {"wall_clock_steps_not_listed", c.steps_over_cap()},
                      {"out_of_order", c.out_of_order()},
                      {"slew_ppm", c.slew_ppm()},
                      {"wall_max_error_us", c.worst_wall_error_us()},
                      {"unsynced_anchors", c.unsynced()}};
  if (c.count()) {
    j["first"] = clock_note(c.first());
    j["last"] = clock_note(c.last());
    j["first"].erase("note");
    j["last"].erase("note");
  }
  return j;
}

std::string clock_line(const ClockAnchors& c) {
  if (!c.count()) return "";
  std::string steps;
  if (c.steps().empty()) {
    steps = "not stepped";
  } else {
    const size_t n = c.steps().size() + c.steps_over_cap();
    const auto& s = c.steps().front();
    steps = fmt::format("STEPPED {} time{} (first by {:+.3f} ms): wall times after a step are off by it", n,
                        n == 1 ? "" : "s", static_cast<double>(s.step_ns) / 1e6);
  }
  return fmt::format("wall clock: {} anchor{}, each within +-{} ns, {}", c.count(), c.count() == 1 ? "" : "s",
                     c.widest_bound_ns(), steps);
}

}  // namespace steptrace
