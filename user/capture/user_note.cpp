// SPDX-License-Identifier: Apache-2.0
#include "capture/user_note.h"

#include <cstring>

#include "steptrace_abi.h"
#include "util/json_text.h"
#include "util/text.h"

namespace steptrace {

std::vector<uint8_t> make_user_note(uint64_t ts_ns, uint32_t pid, const nlohmann::json& body) {
  const std::string text = json_text(body);
  if (text.size() > ST_USER_NOTE_MAX) return {};
  st_user_note n{};
  n.hdr.size = static_cast<uint16_t>(sizeof(n) + text.size());
  n.hdr.kind = ST_EV_USER_NOTE;
  n.hdr.ts_ns = ts_ns;
  n.hdr.pid = pid;
  n.hdr.tid = pid;
  n.len = static_cast<uint32_t>(text.size());
  std::vector<uint8_t> out(sizeof(n) + text.size());
  std::memcpy(out.data(), &n, sizeof(n));
  std::memcpy(out.data() + sizeof(n), text.data(), text.size());
  return out;
}

std::optional<nlohmann::json> parse_user_note(const void* data, size_t len) {
  if (len < sizeof(st_user_note)) return std::nullopt;
  st_user_note n;
  std::memcpy(&n, data, sizeof(n));
  if (n.hdr.kind != ST_EV_USER_NOTE || n.len > ST_USER_NOTE_MAX || sizeof(n) + n.len > len ||
      n.hdr.size != sizeof(n) + n.len)
    return std::nullopt;
  const char* p = static_cast<const char*>(data) + sizeof(n);
  auto j = nlohmann::json::parse(p, p + n.len, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

nlohmann::json identity_to_json(const ProcIdentity& id) {
  nlohmann::json j = nlohmann::json::object();
  const auto& c = id.container;
  if (!c.cgroup.empty()) j["cgroup"] = c.cgroup;
  if (!c.runtime.empty()) j["runtime"] = c.runtime;
  if (!c.container_id.empty()) j["container_id"] = c.container_id;
  if (!c.pod_uid.empty()) j["pod_uid"] = c.pod_uid;
  if (!id.pod_name.empty()) j["pod_name"] = id.pod_name;
  if (!id.pod_namespace.empty()) j["pod_namespace"] = id.pod_namespace;
  if (!id.job.empty()) j["job"] = id.job;
  if (!id.env.empty()) j["env"] = id.env;
  return j;
}

ProcIdentity identity_from_json(const nlohmann::json& j) {
  ProcIdentity id;
  if (!j.is_object()) return id;
  // Strings from a file are host strings again: cleaned, capped.
  auto str = [&j](const char* k, size_t cap) -> std::string {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return "";
    return host_string(utf8_prefix(it->get_ref<const std::string&>(), cap));
  };
  id.container.cgroup = str("cgroup", 512);
  id.container.runtime = str("runtime", 32);
  id.container.container_id = str("container_id", 128);
  id.container.pod_uid = str("pod_uid", 64);
  id.pod_name = str("pod_name", 253);
  id.pod_namespace = str("pod_namespace", 253);
  id.job = str("job", 256);
  if (auto it = j.find("env"); it != j.end() && it->is_object())
    for (auto e = it->begin(); e != it->end() && id.env.size() < 64; ++e)
      if (e.value().is_string())
        id.env[host_string(utf8_prefix(e.key(), 64))] =
            host_string(utf8_prefix(e.value().get_ref<const std::string&>(), 256));
  return id;
}

}  // namespace steptrace
