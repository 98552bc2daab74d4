// SPDX-License-Identifier: Apache-2.0
#include "symbols/elf_symbols.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

namespace steptrace::symbols {
namespace {

constexpr const char* kDebugRoot = "/usr/lib/debug";

// One symbol as read, before sorting and dedup.
struct RawSym {
  uint64_t addr = 0;
  uint64_t size = 0;
  int binding = 0;  // 0 global, 1 weak, 2 local: the preferred name comes first
  std::string name;
};

bool libelf_ready() {
  static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
  return ok;
}

std::string elf_error() {
  const char* m = elf_errmsg(-1);
  return m ? m : "unknown libelf error";
}

// An Elf handle and the descriptor (or memory) it reads from, released together.
class ElfFile {
 public:
  ElfFile() = default;
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;
  ~ElfFile() {
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) ::close(fd_);
  }

  // The Elf of `path`, or an error: no file, not a regular file, not ELF.
  Status open(const std::string& path) {
    if (!libelf_ready()) return make_error("libelf: " + elf_error());
    // O_NONBLOCK: a FIFO at a mapped path must not hang the sampler.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) return make_error(path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return make_error(path + ": not a regular file");
    size_ = static_cast<uint64_t>(st.st_size);
    // ELF_C_READ, not mmap: a file truncated under us is a read error, not SIGBUS.
    elf_ = elf_begin(fd_, ELF_C_READ, nullptr);
    return check(path);
  }

  Status open_memory(const std::string& bytes) {
    if (!libelf_ready()) return make_error("libelf: " + elf_error());
    image_.assign(bytes.begin(), bytes.end());
    size_ = image_.size();
    elf_ = elf_memory(image_.data(), image_.size());
    return check("ELF image");
  }

  Elf* get() const { return elf_; }
  uint64_t size() const { return size_; }

 private:
  Status check(const std::string& what) {
    if (!elf_) return make_error(what + ": " + elf_error());
    if (elf_kind(elf_) != ELF_K_ELF) return make_error(what + ": not an ELF file");
    return Ok{};
  }

  Elf* elf_ = nullptr;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<char> image_;
};

std::string to_hex(const unsigned char* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 0xf]);
  }
  return out;
}

// The NT_GNU_BUILD_ID descriptor in one block of notes, as hex; "" if absent.
std::string build_id_in(Elf_Data* data) {
  if (!data || !data->d_buf) return {};
  size_t off = 0;
  GElf_Nhdr nhdr;
  size_t name_off = 0, desc_off = 0;
  while (off < data->d_size) {
    size_t next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off);
    if (next == 0 || next <= off) break;
    const auto* base = static_cast<const unsigned char*>(data->d_buf);
    bool gnu = nhdr.n_namesz == 4 && name_off + 4 <= data->d_size && std::memcmp(base + name_off, "GNU", 4) == 0;
    if (gnu && nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_descsz > 0 && desc_off + nhdr.n_descsz <= data->d_size)
      return to_hex(base + desc_off, nhdr.n_descsz);
    off = next;
  }
  return {};
}

// The build id from the note sections, else from the PT_NOTE segments.
std::string read_build_id(Elf* elf) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    std::string id = build_id_in(elf_getdata(scn, nullptr));
    if (!id.empty()) return id;
  }
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return {};
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_NOTE) continue;
    Elf_Type t = ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
    std::string id = build_id_in(elf_getdata_rawchunk(elf, static_cast<int64_t>(ph.p_offset), ph.p_filesz, t));
    if (!id.empty()) return id;
  }
  return {};
}

Status read_segments(Elf* elf, std::vector<LoadSegment>& out) {
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return make_error("program headers: " + elf_error());
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph)) return make_error("program header: " + elf_error());
    if (ph.p_type != PT_LOAD) continue;
    out.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
  }
  return Ok{};
}

// The function symbols of one SHT_SYMTAB/SHT_DYNSYM section.
Status read_symbol_section(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, std::vector<RawSym>& out) {
  size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  if (entsize == 0 || shdr.sh_entsize != entsize) return make_error("symbol table with a bad entry size");
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data) return make_error("symbol table: " + elf_error());
  size_t count = data->d_size / entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) return make_error("symbol: " + elf_error());
    int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || !*name) continue;
    int bind = GELF_ST_BIND(sym.st_info);
    out.push_back({sym.st_value, sym.st_size, bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2, name});
  }
  return Ok{};
}

// Every function symbol of .symtab (and .dynsym unless symtab_only).
Status read_symbols(Elf* elf, bool symtab_only, std::vector<RawSym>& out, bool& has_symtab) {
  size_t n = 0;
  if (elf_getshdrnum(elf, &n) != 0) return make_error("section headers: " + elf_error());
  for (size_t i = 1; i < n; ++i) {
    Elf_Scn* scn = elf_getscn(elf, i);
    GElf_Shdr shdr;
    if (!scn || !gelf_getshdr(scn, &shdr)) return make_error("section header: " + elf_error());
    bool symtab = shdr.sh_type == SHT_SYMTAB;
    if (!symtab && (symtab_only || shdr.sh_type != SHT_DYNSYM)) continue;
    has_symtab = has_symtab || symtab;
    if (Status s = read_symbol_section(elf, scn, shdr, out); !s) return s;
  }
  return Ok{};
}

size_t leading_underscores(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && s[n] == '_') ++n;
  return n;
}

const LoadSegment* segment_at(const std::vector<LoadSegment>& segs, uint64_t vaddr) {
  for (const auto& s : segs)
    if (vaddr >= s.vaddr && vaddr - s.vaddr < s.memsz) return &s;
  return nullptr;
}

// Sort by address; one symbol per address (a sized one, then the name with
// the fewest leading underscores, then global before weak before local);
// size-0 symbols end at the next symbol or at the end of their segment.
std::vector<ElfSymbols::Sym> finalize(std::vector<RawSym> raw, const std::vector<LoadSegment>& segs) {
  auto key = [](const RawSym& r) {
    return std::make_tuple(r.addr, r.size == 0, leading_underscores(r.name), r.binding, std::cref(r.name));
  };
  std::sort(raw.begin(), raw.end(), [&](const RawSym& a, const RawSym& b) { return key(a) < key(b); });
  std::vector<ElfSymbols::Sym> out;
  std::vector<uint64_t> sizes;
  for (auto& r : raw) {
    if (!out.empty() && out.back().addr == r.addr) continue;
    out.push_back({r.addr, 0, std::move(r.name)});
    sizes.push_back(r.size);
  }
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t addr = out[i].addr;
    if (sizes[i] != 0) {
      out[i].end = addr + sizes[i] < addr ? kNone : addr + sizes[i];
      continue;
    }
    uint64_t end = i + 1 < out.size() ? out[i + 1].addr : kNone;
    if (const LoadSegment* s = segment_at(segs, addr)) end = std::min(end, s->vaddr + s->memsz);
    out[i].end = end == kNone ? addr + 1 : end;
  }
  return out;
}

// [off, off + len) within a file of `size` bytes, without overflow.
bool within(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

// libelf reads a section header table cut off by the end of the file as "no
// sections" (and so no symbols, no error): a truncated file is refused here,
// as is a PT_LOAD segment or section past the end.
Status check_bounds(Elf* elf, const GElf_Ehdr& ehdr, uint64_t size) {
  if (ehdr.e_shoff != 0) {
    uint64_t count = ehdr.e_shnum == 0 ? 1 : ehdr.e_shnum;  // 0: extended numbering, in section 0
    if (ehdr.e_shentsize == 0 || count > size / ehdr.e_shentsize ||
        !within(ehdr.e_shoff, count * ehdr.e_shentsize, size))
      return make_error("section headers past the end of the file (truncated?)");
    size_t n = 0;
    if (elf_getshdrnum(elf, &n) != 0 || n == 0) return make_error("unreadable section headers");
    for (size_t i = 1; i < n; ++i) {
      GElf_Shdr shdr;
      Elf_Scn* scn = elf_getscn(elf, i);
      if (!scn || !gelf_getshdr(scn, &shdr)) return make_error("section header: " + elf_error());
      if (shdr.sh_type != SHT_NOBITS && !within(shdr.sh_offset, shdr.sh_size, size))
        return make_error("a section past the end of the file (truncated?)");
    }
  }
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return make_error("program headers: " + elf_error());
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph)) return make_error("program header: " + elf_error());
    if (ph.p_type == PT_LOAD && !within(ph.p_offset, ph.p_filesz, size))
      return make_error("a loadable segment past the end of the file (truncated?)");
  }
  return Ok{};
}

}  // namespace

// Reads everything ElfSymbols holds from one open Elf.
class ElfReader {
 public:
  static Result<ElfSymbols> read(Elf* elf, uint64_t size, const std::string& debug_root) {
    GElf_Ehdr ehdr;
    if (!gelf_getehdr(elf, &ehdr)) return make_error("ELF header: " + elf_error());
    if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) return make_error("not an executable or shared object");
    if (Status s = check_bounds(elf, ehdr, size); !s) return s.error();
    ElfSymbols out;
    out.exec_ = ehdr.e_type == ET_EXEC;
    if (Status s = read_segments(elf, out.segments_); !s) return s.error();
    std::vector<RawSym> raw;
    if (Status s = read_symbols(elf, false, raw, out.has_symtab_); !s) return s.error();
    out.build_id_ = read_build_id(elf);
    if (!out.has_symtab_ && out.build_id_.size() > 2 && !debug_root.empty()) add_debug_file(out, debug_root, raw);
    out.syms_ = finalize(std::move(raw), out.segments_);
    return out;
  }

 private:
  // The .symtab of the separate debug file, when one is installed; quiet
  // when it is missing or unreadable (the file's own symbols still count).
  static void add_debug_file(const ElfSymbols& self, const std::string& root, std::vector<RawSym>& raw) {
    const std::string& id = self.build_id_;
    std::string path = root + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    if (::access(path.c_str(), R_OK) != 0) return;
    ElfFile f;
    GElf_Ehdr ehdr;
    if (!f.open(path) || !gelf_getehdr(f.get(), &ehdr) || !check_bounds(f.get(), ehdr, f.size())) return;
    std::vector<RawSym> extra;
    bool has = false;
    if (!read_symbols(f.get(), true, extra, has)) return;
    raw.insert(raw.end(), std::make_move_iterator(extra.begin()), std::make_move_iterator(extra.end()));
  }
};

Result<ElfSymbols> ElfSymbols::load(const std::string& path) { return load(path, kDebugRoot); }

Result<ElfSymbols> ElfSymbols::load(const std::string& path, const std::string& debug_root) {
  ElfFile f;
  if (Status s = f.open(path); !s) return s.error();
  auto r = ElfReader::read(f.get(), f.size(), debug_root);
  if (!r) return make_error(path + ": " + r.error().message);
  return r;
}

Result<ElfSymbols> ElfSymbols::load_image(const std::string& bytes) {
  ElfFile f;
  if (Status s = f.open_memory(bytes); !s) return s.error();
  return ElfReader::read(f.get(), f.size(), "");
}

std::optional<SymbolHit> ElfSymbols::lookup(uint64_t vaddr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), vaddr, [](uint64_t v, const Sym& s) { return v < s.addr; });
  // The nearest symbol below, or (nested symbols) a bigger one a few before it.
  for (int back = 0; back < 8 && it != syms_.begin(); ++back) {
    --it;
    if (vaddr < it->end) return SymbolHit{demangle(it->name), vaddr - it->addr};
  }
  return std::nullopt;
}

std::optional<uint64_t> ElfSymbols::offset_to_vaddr(uint64_t file_offset) const {
  for (const auto& s : segments_)
    if (file_offset >= s.offset && file_offset - s.offset < s.filesz) return file_offset - s.offset + s.vaddr;
  return std::nullopt;
}

std::string demangle(const std::string& raw) {
  if (raw.size() < 2 || raw[0] != '_' || raw[1] != 'Z') return raw;
  int status = 0;
  char* d = abi::__cxa_demangle(raw.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) {
    std::free(d);
    return raw;
  }
  std::string out(d);
  std::free(d);
  return out;
}

}  // namespace steptrace::symbols
