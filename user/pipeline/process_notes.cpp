// SPDX-License-Identifier: Apache-2.0
#include "pipeline/process_notes.h"

#include "capture/user_note.h"
#include "pipeline/clock_notes.h"
#include "util/text.h"

namespace steptrace {

nlohmann::json identity_note(const ProcIdentity& id) {
  auto j = identity_to_json(id);
  j["note"] = "identity";
  return j;
}

nlohmann::json probe_note(const LibProbeNote& p) {
  nlohmann::json j = {{"note", "lib_probe"}, {"path", p.path}, {"via", p.via}, {"functions", p.functions}};
  if (!p.error.empty()) j["error"] = p.error;
  return j;
}

nlohmann::json parent_note(uint32_t ppid) { return {{"note", "parent"}, {"ppid", ppid}}; }

std::optional<uint32_t> parent_in_note(const nlohmann::json& note) {
  auto type = note.find("note");
  if (type == note.end() || *type != "parent") return std::nullopt;
  auto p = note.find("ppid");
  if (p == note.end() || !p->is_number_unsigned() || p->get<uint64_t>() == 0 || p->get<uint64_t>() > UINT32_MAX)
    return std::nullopt;
  return p->get<uint32_t>();
}

void ProcessNotes::on_note(uint32_t pid, const nlohmann::json& note) {
  auto type = note.find("note");
  if (type == note.end() || !type->is_string()) {
    ++malformed;
    return;
  }
  if (*type == "identity") {
    if (identities.size() >= kMaxIdentities && !identities.count(pid)) {
      ++over_cap;
      return;
    }
    identities[pid] = identity_from_json(note);
  } else if (*type == "lib_probe") {
    if (probes.size() >= kMaxProbes) {
      ++over_cap;
      return;
    }
    auto str = [&note](const char* k) -> std::string {
      auto it = note.find(k);
      return it != note.end() && it->is_string() ? host_string(utf8_prefix(it->get_ref<const std::string&>(), 512)) : "";
    };
    LibProbeNote p;
    p.pid = pid;
    p.path = str("path");
    p.via = str("via");
    p.error = str("error");
    if (auto f = note.find("functions"); f != note.end() && f->is_number_integer()) p.functions = f->get<int>();
    if (p.path.empty()) {
      ++malformed;
      return;
    }
    probes.push_back(std::move(p));
  } else if (*type == "parent") {
    if (!parent_in_note(note)) ++malformed;  // the timeline keeps the parent (Analysis::on_note)
  } else if (*type == "clock") {
    if (!anchor_in_note(note)) ++malformed;  // Analysis::clock keeps the anchor (Analysis::on_note)
  }  // "symbols": the stack samples' names (Analysis::on_note); other types: a newer steptrace's, skipped
}

std::vector<const LibProbeNote*> ProcessNotes::probes_for(uint32_t pid) const {
  std::vector<const LibProbeNote*> mine, all;
  for (const auto& p : probes) {
    all.push_back(&p);
    if (p.pid == pid) mine.push_back(&p);
  }
  return mine.empty() ? all : mine;
}

}  // namespace steptrace
