// SPDX-License-Identifier: Apache-2.0
// Instruction pointers -> function names for the on-CPU stack sampler: user
// IPs against a snapshot of the process's executable mappings, kernel IPs
// against /proc/kallsyms. Every failure (unreadable file, stripped file,
// kptr_restrict) degrades to "module+0xoffset" or "[unknown]".
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/elf_symbols.h"
#include "symbols/proc_maps.h"
#include "util/result.h"
#include "util/sys_root.h"

namespace steptrace::symbols {

// The file a mapping maps, as a path steptrace can open: /proc/PID/map_files
// (the very file, even deleted or in another mount namespace; needs
// CAP_SYS_ADMIN), else /proc/PID/root/<path> while that is still the mapped
// inode. `st` (when given) gets its stat.
std::optional<std::string> mapped_file_path(const SysRoot& root, uint32_t pid, const MapEntry& m,
                                            struct stat* st = nullptr);

struct Frame {
  std::string function;  // demangled name, empty if not resolved
  // Basename of the mapped file ("libc.so.6", "trainsim"), "[vdso]",
  // "[kernel]" or the kernel module name; "" if unknown.
  std::string module;
  // ip - function start when resolved; else the file offset (user) or ip (kernel).
  uint64_t offset = 0;
  bool resolved() const { return !function.empty(); }
  // "function" when resolved; "module+0x1a2b" when only the module is known;
  // "[unknown]" otherwise.
  std::string display() const;
};

// Not thread-safe: one thread symbolizes (resolve_kernel loads kallsyms
// lazily, on its first call).
class Symbolizer {
 public:
  explicit Symbolizer(SysRoot root = SysRoot());  // proc root configurable for tests
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Deferred: a snapshot only reads the map and opens each new file (kept
  // open, so it can still be read once the process is gone); the symbols are
  // read by load_deferred(). A live session defers, so that reading a
  // library's symbols never takes CPU from the job it traces.
  void set_deferred(bool on) { deferred_ = on; }
  void load_deferred();

  // Snapshot pid's executable mappings now (the process may exit later) and
  // load each mapped file's symbols into a cache shared by all processes,
  // keyed by build id (else by device, inode, size and mtime). Files are
  // opened through /proc/PID/map_files/<start>-<end> first (containers,
  // deleted files), falling back to /proc/PID/root/<path> (same inode only).
  // A second call replaces the snapshot (exec, dlopen). An error for a pid
  // that is gone; a file that cannot be read only loses its function names.
  Status snapshot(uint32_t pid);
  bool has_snapshot(uint32_t pid) const;
  Frame resolve_user(uint32_t pid, uint64_t ip) const;  // against the last snapshot
  // /proc/kallsyms, loaded once, lazily: module "[kernel]" or the module name.
  Frame resolve_kernel(uint64_t ip) const;
  void forget(uint32_t pid);
  size_t cached_files() const;  // distinct files with symbols loaded

 private:
  struct Mapping {
    uint64_t start = 0, end = 0, pgoff = 0;
    std::string module;
    std::shared_ptr<const ElfSymbols> elf;  // null when unreadable (or not loaded yet)
    std::string identity;                   // the file's, while its symbols wait in pending_
  };
  // 16 bytes a symbol: a host's kallsyms has 100-250 k text symbols, kept
  // for the whole session (the text and 40-byte entries were ~16 MiB).
  struct KernelSym {
    uint64_t addr = 0;
    uint32_t name_at = 0;  // into ksym_names_
    uint16_t name_len = 0;
    uint16_t module = 0;  // into ksym_modules_; 0 is the kernel image ("")
  };
  std::string_view ksym_name(const KernelSym& s) const { return std::string_view(ksym_names_).substr(s.name_at, s.name_len); }

  std::shared_ptr<const ElfSymbols> load_file(uint32_t pid, const MapEntry& m, std::string* pending_identity);
  std::shared_ptr<const ElfSymbols> load_vdso(uint32_t pid, const MapEntry& m);
  std::shared_ptr<const ElfSymbols> intern(std::shared_ptr<const ElfSymbols> elf, const std::string& identity);
  void load_kallsyms() const;

  SysRoot root_;
  std::map<uint32_t, std::vector<Mapping>> procs_;  // each sorted by start
  // The cache: by build id ("b:<hex>") or file identity ("f:dev:ino:size:mtime").
  std::map<std::string, std::shared_ptr<const ElfSymbols>> files_;
  // File identity -> its entry in files_ (null: a file that failed to load).
  std::map<std::string, std::shared_ptr<const ElfSymbols>> by_identity_;
  bool deferred_ = false;
  std::map<std::string, int> pending_;  // file identity -> an open descriptor, symbols not read yet

  mutable bool kallsyms_loaded_ = false;
  mutable std::string ksym_names_;                // the kept symbols' names, back to back
  mutable std::vector<std::string> ksym_modules_;  // [0] = "" (the kernel image)
  mutable std::vector<KernelSym> ksyms_;           // text symbols by address, one per address
  mutable size_t kernel_last_ = 0;        // one past the last kernel-image symbol in ksyms_
};

}  // namespace steptrace::symbols
