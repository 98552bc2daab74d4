// SPDX-License-Identifier: Apache-2.0
// The executable mappings of a /proc/PID/maps text: where the stack sampler's
// user IPs point. Pure (no I/O) so it is unit-tested and fuzzed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace steptrace::symbols {

// One line: "7f00aa000000-7f00aa100000 r-xp 00010000 103:02 5678 /usr/lib/libfoo.so".
struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;    // exclusive
  uint64_t pgoff = 0;  // file offset of `start`
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  // As the process sees it (its mount namespace), spaces kept, without the
  // " (deleted)" suffix; "[vdso]", "[vsyscall]"...; "" for anonymous memory.
  std::string path;
  bool deleted = false;  // the kernel printed " (deleted)": the file was unlinked or replaced

  bool is_file() const { return !path.empty() && path.front() == '/'; }
};

// The executable mappings (perms with 'x'), in the order given; lines that
// are not of the form above are skipped.
std::vector<MapEntry> parse_proc_maps(std::string_view text);

}  // namespace steptrace::symbols
