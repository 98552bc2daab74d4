// SPDX-License-Identifier: Apache-2.0
// Parsers of kernel-provided text that choose attach tiers: /proc/kallsyms
// lines and tracefs event format files. Pure (no I/O) so they are unit-tested
// and fuzzed (tests/fuzz/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace {

// One /proc/kallsyms line: "ffffffffc0a01230 t ncdev_ioctl\t[neuron]".
struct KallsymsEntry {
  std::string_view name;
  std::string_view module;  // "" for the kernel image
  char type = 0;
};
std::optional<KallsymsEntry> parse_kallsyms_line(std::string_view line);

// Does `text` (kallsyms lines) define a text symbol `sym` (in `module`, or
// anywhere when module is empty)?
bool kallsyms_has(std::string_view text, std::string_view sym, std::string_view module = {});

// A field of a tracefs event format file:
//   "\tfield:u32 device_index;\toffset:8;\tsize:4;\tsigned:0;"
struct TpField {
  std::string name;
  uint32_t offset = 0;
  uint32_t size = 0;
};
// Every well-formed field line of a format file; malformed lines are skipped.
std::vector<TpField> parse_tp_format(std::string_view text);

// The fields steptrace reads from one event, with the offsets it compiled in.
struct TpExpect {
  std::string_view field;
  uint32_t offset, size;
};
// Empty when every expected field is present at its offset and size;
// otherwise the first mismatch, in words.
std::string tp_layout_mismatch(const std::vector<TpField>& fields, const std::vector<TpExpect>& want);

// The neuron:* driver tracepoints steptrace attaches to, with the layout
// bpf/accel_ioctl.bpf.c reads (offsets after the 8-byte common header).
struct NeuronTp {
  std::string_view event;  // under events/neuron/
  std::vector<TpExpect> fields;
};
const std::vector<NeuronTp>& neuron_tracepoints();

}  // namespace steptrace
