// SPDX-License-Identifier: Apache-2.0
#include "loader/kernel_text.h"

#include <fmt/core.h>

#include <charconv>
#include <cstddef>

#include "neuron_uapi.h"

namespace steptrace {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "key:value" inside a ';'-separated format line -> value, or nullopt.
std::optional<std::string_view> kv(std::string_view part, std::string_view key) {
  part = trim(part);
  if (part.size() <= key.size() || part.substr(0, key.size()) != key || part[key.size()] != ':') return std::nullopt;
  return trim(part.substr(key.size() + 1));
}

std::optional<uint32_t> to_u32(std::string_view s) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!f(line)) return;
  }
}

}  // namespace

std::optional<KallsymsEntry> parse_kallsyms_line(std::string_view line) {
  // address, type, name, optional [module]; separated by spaces/tabs
  size_t a = line.find(' ');
  if (a == std::string_view::npos || a == 0) return std::nullopt;
  for (size_t i = 0; i < a; ++i) {
    char c = line[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return std::nullopt;
  }
  std::string_view rest = line.substr(a + 1);
  if (rest.size() < 3 || rest[1] != ' ') return std::nullopt;
  KallsymsEntry e;
  e.type = rest[0];
  rest = rest.substr(2);
  size_t end = rest.find_first_of(" \t");
  e.name = rest.substr(0, end);
  if (e.name.empty()) return std::nullopt;
  if (end != std::string_view::npos) {
    std::string_view m = trim(rest.substr(end));
    if (m.size() >= 2 && m.front() == '[' && m.back() == ']') e.module = m.substr(1, m.size() - 2);
    else if (!m.empty()) return std::nullopt;
  }
  return e;
}

bool kallsyms_has(std::string_view text, std::string_view sym, std::string_view module) {
  bool found = false;
  for_each_line(text, [&](std::string_view line) {
    auto e = parse_kallsyms_line(line);
    if (e && e->name == sym && (e->type == 't' || e->type == 'T') && (module.empty() || e->module == module)) {
      found = true;
      return false;
    }
    return true;
  });
  return found;
}

std::vector<TpField> parse_tp_format(std::string_view text) {
  std::vector<TpField> out;
  for_each_line(text, [&](std::string_view line) {
    std::optional<std::string_view> decl;
    std::optional<uint32_t> off, size;
    std::string_view rest = line;
    while (!rest.empty()) {
      size_t semi = rest.find(';');
      if (semi == std::string_view::npos) break;
      std::string_view part = rest.substr(0, semi);
      rest = rest.substr(semi + 1);
      if (auto v = kv(part, "field")) decl = v;
      else if (auto o = kv(part, "offset")) off = to_u32(*o);
      else if (auto z = kv(part, "size")) size = to_u32(*z);
    }
    if (!decl || !off || !size) return true;
    // "u32 device_index" / "struct mem_chunk * mc" / "char comm[16]": the name is the last word, minus [N].
    std::string_view d = trim(*decl);
    size_t br = d.find('[');
    if (br != std::string_view::npos) d = trim(d.substr(0, br));
    size_t sp = d.find_last_of(" \t*");
    std::string_view name = sp == std::string_view::npos ? d : d.substr(sp + 1);
    if (name.empty()) return true;
    out.push_back({std::string(name), *off, *size});
    return true;
  });
  return out;
}

std::string tp_layout_mismatch(const std::vector<TpField>& fields, const std::vector<TpExpect>& want) {
  for (const auto& w : want) {
    const TpField* f = nullptr;
    for (const auto& x : fields)
      if (x.name == w.field) f = &x;
    if (!f) return fmt::format("no field {}", w.field);
    if (f->offset != w.offset || f->size != w.size)
      return fmt::format("field {} at offset {} size {}, expected {} size {}", w.field, f->offset, f->size, w.offset,
                         w.size);
  }
  return {};
}

// The offsets the BPF programs read (bpf/neuron_uapi.h), as tracefs must show them.
#define ST_TP_FIELD(type, field) \
  TpExpect { #field, static_cast<uint32_t>(offsetof(type, field)), static_cast<uint32_t>(sizeof(type::field)) }

const std::vector<NeuronTp>& neuron_tracepoints() {
  static const std::vector<NeuronTp> k = {
      {"dma_queue_copy_start",
       {ST_TP_FIELD(st_ntp_dma_queue_copy_start, device_index), ST_TP_FIELD(st_ntp_dma_queue_copy_start, eng_id),
        ST_TP_FIELD(st_ntp_dma_queue_copy_start, qid), ST_TP_FIELD(st_ntp_dma_queue_copy_start, tx_desc_count),
        ST_TP_FIELD(st_ntp_dma_queue_copy_start, rx_desc_count)}},
      {"dma_ack_completed",
       {ST_TP_FIELD(st_ntp_dma_ack_completed, device_index), ST_TP_FIELD(st_ntp_dma_ack_completed, eng_id),
        ST_TP_FIELD(st_ntp_dma_ack_completed, qid), ST_TP_FIELD(st_ntp_dma_ack_completed, count)}},
      {"ioctl_mem_copyin", {ST_TP_FIELD(st_ntp_mem_copyio, device_index), ST_TP_FIELD(st_ntp_mem_copyio, size)}},
      {"ioctl_mem_copyout", {ST_TP_FIELD(st_ntp_mem_copyio, device_index), ST_TP_FIELD(st_ntp_mem_copyio, size)}},
  };
  return k;
}

#undef ST_TP_FIELD

}  // namespace steptrace
