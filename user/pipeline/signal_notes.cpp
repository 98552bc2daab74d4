// SPDX-License-Identifier: Apache-2.0
#include "pipeline/signal_notes.h"

#include <algorithm>

#include "steptrace_abi.h"

namespace steptrace {

using nlohmann::json;
using signals::SignalsData;

namespace {

// Room for the note's own keys under ST_USER_NOTE_MAX.
constexpr size_t kNoteBudget = ST_USER_NOTE_MAX - 512;
// A capture's setup cannot name more than these (a hostile one grows nothing).
constexpr size_t kMaxDevices = 256, kMaxPorts = 256, kMaxCpus = 65536, kMaxThreads = 1'000'000;

// Items packed greedily into notes of `type` under the size budget.
void pack(const char* type, std::vector<json>& items, std::vector<json>& out) {
  json cur = json::array();
  size_t size = 0;
  for (auto& it : items) {
    const size_t n = it.dump().size() + 1;
    if (!cur.empty() && size + n > kNoteBudget) {
      out.push_back({{"note", type}, {"s", std::move(cur)}});
      cur = json::array();
      size = 0;
    }
    if (n > kNoteBudget) continue;  // one item alone too large: left out (not expected of any kind)
    cur.push_back(std::move(it));
    size += n;
  }
  if (!cur.empty()) out.push_back({{"note", type}, {"s", std::move(cur)}});
}

json setup_json(const SignalsData& d) {
  json devices = json::array(), ports = json::array(), pid_device = json::array(), device_node = json::array();
  for (const auto& [idx, path] : d.devices) devices.push_back({idx, path});
  for (const auto& p : d.efa_ports) ports.push_back({p.index, p.name, p.rate_gbit});
  for (const auto& [pid, dev] : d.pid_device) pid_device.push_back({pid, dev});
  for (const auto& [dev, node] : d.numa.device_node) device_node.push_back({dev, node});
  return {{"note", "signals_setup"},      {"dev_root", d.cfg.dev_root},       {"sysfs_root", d.cfg.sysfs_root},
          {"max_samples", d.cfg.max_samples}, {"devices", devices},           {"efa_ports", ports},
          {"nds_problem", d.nds_problem}, {"pid_device", pid_device},         {"samples_dropped", d.samples_dropped},
          {"cpu_node", d.numa.cpu_node},  {"device_node", device_node},       {"numa_nodes", d.numa.nodes}};
}

bool is_u64(const json& j) { return j.is_number_unsigned(); }
bool is_int(const json& j) { return j.is_number_integer(); }

// [a, b] pairs of integers, at most `max`.
template <typename F>
bool int_pairs(const json& j, size_t max, F&& f) {
  if (!j.is_array() || j.size() > max) return false;
  for (const auto& p : j)
    if (!p.is_array() || p.size() != 2 || !is_int(p[0]) || !is_int(p[1])) return false;
  for (const auto& p : j) f(p[0].get<int64_t>(), p[1].get<int64_t>());
  return true;
}

}  // namespace

std::vector<json> SignalNoteWriter::notes(const SignalsData& all, const SignalsData& fresh, uint64_t now_ns,
                                          bool final) {
  std::vector<json> out;
  std::vector<json> items;
  if (final || !setup_checked_ || now_ns - setup_checked_ns_ >= kSetupCheckNs) {
    setup_checked_ = true;
    setup_checked_ns_ = now_ns;
    json setup = setup_json(all);
    if (std::string s = setup.dump(); s != setup_sent_ && s.size() <= kNoteBudget) {
      setup_sent_ = std::move(s);
      out.push_back(std::move(setup));
    }
    for (const auto& [tid, comm] : all.comms)
      if (auto it = comms_sent_.find(tid); it == comms_sent_.end() || it->second != comm) {
        auto p = all.tid_pid.find(tid);
        items.push_back({tid, p != all.tid_pid.end() ? p->second : 0, comm});
        comms_sent_[tid] = comm;
      }
    pack("signals_threads", items, out);
    items.clear();
  }
  for (const auto& s : fresh.nds) {
    const auto& n = s.snap;
    items.push_back({s.pid, s.device, s.nc, s.prev_ns, s.seen_ns, s.delta, n.inference_count, n.completed, n.errors,
                     n.timeouts, n.cc_hw_errors, n.time_in_use_us, n.device_s, n.total_s, n.compute_s, n.cc_s});
  }
  pack("signals_nds", items, out);
  items.clear();
  for (const auto& s : fresh.efa) {
    // Only the counters that moved since the port's last sample (most do
    // not between two 10 ms samples); the first sample of a port is whole.
    std::vector<uint64_t>& last = last_efa_[s.port];
    json changed = json::array();
    for (size_t k = 0; k < s.v.size(); ++k)
      if (k >= last.size() || last[k] != s.v[k]) changed.push_back(k), changed.push_back(s.v[k]);
    last = s.v;
    items.push_back({s.ts, s.port, s.v.size(), std::move(changed)});
  }
  pack("signals_efa", items, out);
  items.clear();
  for (const auto& s : fresh.sysfs) items.push_back({s.ts, s.device, s.v});
  pack("signals_sysfs", items, out);
  return out;
}

bool is_signal_note(const json& note) {
  auto t = note.find("note");
  return t != note.end() && t->is_string() && t->get_ref<const std::string&>().rfind("signals_", 0) == 0;
}

bool SignalNoteReader::on_note(const json& note) {
  if (!is_signal_note(note)) return false;
  const std::string& type = note["note"].get_ref<const std::string&>();
  bool ok = true;
  if (type == "signals_setup") ok = setup(note);
  else if (type == "signals_threads") ok = threads(note);
  else if (type == "signals_nds") ok = nds(note);
  else if (type == "signals_efa") ok = efa(note);
  else if (type == "signals_sysfs") ok = sysfs(note);
  else return true;  // a newer steptrace's kind: skipped
  if (!ok) ++malformed_;
  return true;
}

bool SignalNoteReader::setup(const json& j) {
  SignalsData d = d_;  // applied whole or not at all
  auto str = [&](const char* k, std::string& v) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return false;
    v = it->get<std::string>();
    return true;
  };
  if (!str("dev_root", d.cfg.dev_root) || !str("sysfs_root", d.cfg.sysfs_root) || !str("nds_problem", d.nds_problem))
    return false;
  // The recorder's cap, never above this build's (a capture cannot make a replay keep more).
  if (auto m = j.find("max_samples"); m != j.end() && is_u64(*m))
    d.cfg.max_samples = std::min(m->get<size_t>(), signals::SignalsConfig{}.max_samples);
  if (auto s = j.find("samples_dropped"); s != j.end() && is_u64(*s)) d.samples_dropped = s->get<uint64_t>();
  const json& devs = j.value("devices", json());
  if (!devs.is_array() || devs.size() > kMaxDevices) return false;
  d.devices.clear();
  for (const auto& p : devs) {
    if (!p.is_array() || p.size() != 2 || !is_int(p[0]) || !p[1].is_string()) return false;
    d.devices.emplace_back(p[0].get<int>(), p[1].get<std::string>());
  }
  const json& ports = j.value("efa_ports", json());
  if (!ports.is_array() || ports.size() > kMaxPorts) return false;
  d.efa_ports.clear();
  for (const auto& p : ports) {
    if (!p.is_array() || p.size() != 3 || !is_int(p[0]) || !p[1].is_string() || !p[2].is_number()) return false;
    signals::EfaPort port;
    port.index = p[0].get<int>();
    port.name = p[1].get<std::string>();
    port.rate_gbit = p[2].get<double>();
    d.efa_ports.push_back(std::move(port));
  }
  d.pid_device.clear();
  if (!int_pairs(j.value("pid_device", json()), kMaxThreads,
                 [&](int64_t pid, int64_t dev) { d.pid_device[static_cast<uint32_t>(pid)] = static_cast<int>(dev); }))
    return false;
  d.numa.device_node.clear();
  if (!int_pairs(j.value("device_node", json()), kMaxDevices,
                 [&](int64_t dev, int64_t node) { d.numa.device_node[static_cast<int>(dev)] = static_cast<int>(node); }))
    return false;
  const json& cpus = j.value("cpu_node", json());
  if (!cpus.is_array() || cpus.size() > kMaxCpus) return false;
  d.numa.cpu_node.clear();
  for (const auto& c : cpus) {
    if (!is_int(c)) return false;
    d.numa.cpu_node.push_back(c.get<int>());
  }
  if (auto n = j.find("numa_nodes"); n != j.end() && is_int(*n)) d.numa.nodes = n->get<int>();
  d_ = std::move(d);
  return true;
}

bool SignalNoteReader::threads(const json& j) {
  const json& s = j.value("s", json());
  if (!s.is_array()) return false;
  for (const auto& t : s) {
    if (!t.is_array() || t.size() != 3 || !is_u64(t[0]) || !is_u64(t[1]) || !t[2].is_string()) return false;
    if (d_.comms.size() >= kMaxThreads) return true;
    const auto tid = t[0].get<uint32_t>();
    d_.comms[tid] = t[2].get<std::string>();
    d_.tid_pid[tid] = t[1].get<uint32_t>();
  }
  return true;
}

bool SignalNoteReader::nds(const json& j) {
  const json& s = j.value("s", json());
  if (!s.is_array()) return false;
  for (const auto& e : s) {
    if (!e.is_array() || e.size() != 16) return false;
    for (size_t k = 0; k < 12; ++k)
      if (!is_int(e[k])) return false;
    for (size_t k = 12; k < 16; ++k)
      if (!e[k].is_number()) return false;
    if (d_.nds.size() >= d_.cfg.max_samples) {
      ++d_.samples_dropped;
      continue;
    }
    signals::NdsSample n;
    n.pid = e[0].get<uint32_t>();
    n.device = e[1].get<int>();
    n.nc = e[2].get<int>();
    n.prev_ns = e[3].get<uint64_t>();
    n.seen_ns = e[4].get<uint64_t>();
    n.delta = e[5].get<uint64_t>();
    auto& p = n.snap;
    p.inference_count = e[6].get<uint64_t>();
    p.completed = e[7].get<uint64_t>();
    p.errors = e[8].get<uint64_t>();
    p.timeouts = e[9].get<uint64_t>();
    p.cc_hw_errors = e[10].get<uint64_t>();
    p.time_in_use_us = e[11].get<uint64_t>();
    p.device_s = e[12].get<double>();
    p.total_s = e[13].get<double>();
    p.compute_s = e[14].get<double>();
    p.cc_s = e[15].get<double>();
    d_.nds.push_back(n);
  }
  return true;
}

bool SignalNoteReader::efa(const json& j) {
  const json& s = j.value("s", json());
  if (!s.is_array()) return false;
  const size_t names = signals::efa_counter_names().size();
  for (const auto& e : s) {
    if (!e.is_array() || e.size() != 4 || !is_u64(e[0]) || !is_int(e[1]) || !is_u64(e[2]) || !e[3].is_array() ||
        e[3].size() % 2)
      return false;
    const size_t n = e[2].get<size_t>();
    const int port = e[1].get<int>();
    if (n > names || port < 0 || static_cast<size_t>(port) >= kMaxPorts) return false;
    std::vector<uint64_t>& last = last_efa_[port];
    last.resize(n, UINT64_MAX);
    const json& ch = e[3];
    for (size_t k = 0; k < ch.size(); k += 2) {
      if (!is_u64(ch[k]) || !is_u64(ch[k + 1]) || ch[k].get<uint64_t>() >= n) return false;
      last[ch[k].get<size_t>()] = ch[k + 1].get<uint64_t>();
    }
    if (d_.efa.size() >= d_.cfg.max_samples) {
      ++d_.samples_dropped;
      continue;
    }
    d_.efa.push_back({e[0].get<uint64_t>(), port, last});
  }
  return true;
}

bool SignalNoteReader::sysfs(const json& j) {
  const json& s = j.value("s", json());
  if (!s.is_array()) return false;
  for (const auto& e : s) {
    if (!e.is_array() || e.size() != 3 || !is_u64(e[0]) || !is_int(e[1]) || !e[2].is_object()) return false;
    signals::SysfsSample x;
    x.ts = e[0].get<uint64_t>();
    x.device = e[1].get<int>();
    for (const auto& [k, v] : e[2].items()) {
      if (!is_u64(v)) return false;
      x.v[k] = v.get<uint64_t>();
    }
    if (d_.sysfs.size() >= d_.cfg.max_samples) {
      ++d_.samples_dropped;
      continue;
    }
    d_.sysfs.push_back(std::move(x));
  }
  return true;
}

}  // namespace steptrace
