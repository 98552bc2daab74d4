// SPDX-License-Identifier: Apache-2.0
// The function symbols of one ELF file (an executable, a shared library, a
// vDSO image), read with libelf: address -> function name for the stack
// sampler's user frames. docs: shared/domain/stacks.md section 4.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace::symbols {

struct SymbolHit {
  std::string name;     // demangled when it is a C++ name
  uint64_t offset = 0;  // vaddr - function start
};

// A PT_LOAD program header: file bytes [offset, offset + filesz) are mapped
// at ELF virtual addresses [vaddr, vaddr + filesz).
struct LoadSegment {
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  bool executable = false;
};

class ElfSymbols {
 public:
  // The FUNC and GNU_IFUNC symbols of .symtab and .dynsym (plus the .symtab
  // of /usr/lib/debug/.build-id/xx/rest.debug when the file has no .symtab),
  // the PT_LOAD headers and the GNU build id. An error for anything that is
  // not a well-formed ELF file; a valid file without symbols loads empty.
  static Result<ElfSymbols> load(const std::string& path);
  // The same from an ELF image in memory (the vDSO read from a process).
  static Result<ElfSymbols> load_image(const std::string& bytes);
  // As load(), with the debug-file tree at `debug_root` ("" for none).
  static Result<ElfSymbols> load(const std::string& path, const std::string& debug_root);

  // The function holding `vaddr`: [addr, addr + size), or up to the next
  // symbol (within its segment) for a symbol of size 0.
  std::optional<SymbolHit> lookup(uint64_t vaddr) const;
  // File offset -> ELF vaddr through the PT_LOAD segment holding the offset.
  std::optional<uint64_t> offset_to_vaddr(uint64_t file_offset) const;

  bool is_exec() const { return exec_; }  // ET_EXEC: runtime addresses are vaddrs
  const std::string& build_id() const { return build_id_; }  // lowercase hex, "" if none
  const std::vector<LoadSegment>& segments() const { return segments_; }
  size_t symbol_count() const { return syms_.size(); }
  bool has_symtab() const { return has_symtab_; }

  // One function symbol, after sorting and dedup; `end` is exclusive.
  struct Sym {
    uint64_t addr = 0;
    uint64_t end = 0;
    std::string name;  // raw (mangled) name: demangled on lookup
  };

 private:
  friend class ElfReader;
  std::vector<Sym> syms_;
  std::vector<LoadSegment> segments_;
  std::string build_id_;
  bool exec_ = false;
  bool has_symtab_ = false;
};

// A C++ symbol demangled with abi::__cxa_demangle, or `raw` as it is.
std::string demangle(const std::string& raw);

}  // namespace steptrace::symbols
