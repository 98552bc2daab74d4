// SPDX-License-Identifier: Apache-2.0
#include "symbols/python_procs.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "symbols/elf_symbols.h"
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"

namespace steptrace::symbols {
namespace {

constexpr uint64_t kPage = 4096;            // x86_64
constexpr uint32_t kGlibcTssBase = 0x318;   // offsetof(struct pthread, specific_1stblock[0].data), glibc 2.36
constexpr uint32_t kGlibcTssStride = 16;    // sizeof(struct pthread_key_data)
constexpr int kGlibcFirstBlockKeys = 32;    // PTHREAD_KEY_2NDLEVEL_SIZE: keys past it are not in the TCB
constexpr size_t kMaxString = 512;          // bytes of a file or qualname kept
constexpr size_t kMapsLimit = 64u << 20;

// Per minor version (shared/domain/stacks.md section 3; checked against the
// DWARF of 3.11.2, 3.11.7 and 3.12.1).
struct PyOffsets {
  uint32_t runtime_tss_key;  // _PyRuntime -> autoTSSkey (a Py_tss_t: _is_initialized, _key)
  uint16_t tstate_cframe, cframe_current, frame_code, frame_previous, frame_owner;
  uint16_t co_filename, co_qualname, co_firstlineno;
  uint16_t ascii_size, compact_size;  // sizeof PyASCIIObject, PyCompactUnicodeObject
};
constexpr PyOffsets kPy311{592, 56, 8, 32, 48, 0, 112, 128, 72, 48, 72};
constexpr PyOffsets kPy312{1544, 56, 0, 0, 8, 70, 112, 128, 68, 40, 56};
struct PyTss {  // Py_tss_t
  int32_t initialized;
  uint32_t key;  // pthread_key_t
};
constexpr uint16_t kCodeReadSize = 136;  // through co_qualname (128 + 8), both versions

const PyOffsets* offsets_for(int major, int minor) {
  if (major != 3) return nullptr;
  if (minor == 11) return &kPy311;
  if (minor == 12) return &kPy312;
  return nullptr;
}

std::string proc_dir(const SysRoot& root, uint32_t pid) { return root.proc() + "/" + std::to_string(pid); }

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "python3.10", "libpython3.12.so.1.0", "python2.7" -> (major, minor).
std::optional<std::pair<int, int>> version_from_name(const std::string& base) {
  size_t at = base.find("python");
  if (at == std::string::npos) return std::nullopt;
  int major = 0, minor = 0, used = 0;
  if (std::sscanf(base.c_str() + at + 6, "%d.%d%n", &major, &minor, &used) != 2 || used == 0) return std::nullopt;
  return std::make_pair(major, minor);
}

bool python_named(const std::string& base) {
  return base.rfind("python", 0) == 0 || base.rfind("libpython", 0) == 0;
}

// The ELF facts find_python needs, read with libelf in one pass.
struct PyElf {
  bool exec = false;
  std::vector<LoadSegment> segments;
  std::optional<uint64_t> runtime, version, code_type;  // ELF vaddrs of _PyRuntime, Py_Version, PyCode_Type
};

class ElfHandle {
 public:
  ElfHandle() = default;
  ElfHandle(const ElfHandle&) = delete;
  ElfHandle& operator=(const ElfHandle&) = delete;
  ~ElfHandle() {
    if (elf) elf_end(elf);
    if (fd >= 0) ::close(fd);
  }
  int fd = -1;
  Elf* elf = nullptr;
};

// Defined symbols named _PyRuntime, Py_Version, PyCode_Type in one symbol table section.
void scan_symbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, PyElf& out) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || shdr.sh_entsize == 0) return;
  size_t n = shdr.sh_size / shdr.sh_entsize;
  for (size_t i = 0; i < n; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0 || sym.st_name == 0) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || name[0] == '\0') continue;
    if (!out.runtime && std::strcmp(name, "_PyRuntime") == 0) out.runtime = sym.st_value;
    else if (!out.version && std::strcmp(name, "Py_Version") == 0) out.version = sym.st_value;
    else if (!out.code_type && std::strcmp(name, "PyCode_Type") == 0) out.code_type = sym.st_value;
  }
}

Result<PyElf> read_py_elf(const std::string& path) {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  if (!ready) return make_error("libelf could not be initialized");
  ElfHandle h;
  h.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (h.fd < 0) return make_error(path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(h.fd, &st) != 0 || !S_ISREG(st.st_mode)) return make_error(path + ": not a regular file");
  h.elf = elf_begin(h.fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr ehdr;
  if (!h.elf || elf_kind(h.elf) != ELF_K_ELF || !gelf_getehdr(h.elf, &ehdr))
    return make_error(path + ": not an ELF file");
  if (gelf_getclass(h.elf) != ELFCLASS64 || ehdr.e_machine != EM_X86_64)
    return make_error(path + ": not an x86_64 ELF file");
  PyElf out;
  out.exec = ehdr.e_type == ET_EXEC;
  size_t nph = 0;
  if (elf_getphdrnum(h.elf, &nph) != 0) return make_error(path + ": no program headers");
  for (size_t i = 0; i < nph; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(h.elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    out.segments.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
  }
  // .dynsym first (what CPython exports), then .symtab when something is missing.
  for (Elf64_Word type : {SHT_DYNSYM, SHT_SYMTAB}) {
    if (out.runtime && out.version && out.code_type) break;
    for (Elf_Scn* scn = elf_nextscn(h.elf, nullptr); scn; scn = elf_nextscn(h.elf, scn)) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) && shdr.sh_type == type) scan_symbols(h.elf, scn, shdr, out);
    }
  }
  return out;
}

// Runtime address - ELF vaddr for the file mapped at `m`: 0 for ET_EXEC;
// else from the PT_LOAD segment (pages) holding the mapping's file offset.
std::optional<uint64_t> load_bias(const PyElf& elf, const MapEntry& m) {
  if (elf.exec) return 0;
  for (bool want_exec : {true, false}) {
    for (const LoadSegment& s : elf.segments) {
      if (s.executable != want_exec) continue;
      uint64_t off_page = s.offset & ~(kPage - 1);
      uint64_t vaddr_page = s.vaddr & ~(kPage - 1);
      if (m.pgoff < off_page || m.pgoff >= s.offset + std::max<uint64_t>(s.filesz, 1)) continue;
      return m.start - (vaddr_page + (m.pgoff - off_page));
    }
  }
  return std::nullopt;
}

// /proc/PID/mem, read with pread.
class ProcMem {
 public:
  ProcMem(const SysRoot& root, uint32_t pid) {
    fd_ = ::open((proc_dir(root, pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) err_ = errno;
  }
  ProcMem(const ProcMem&) = delete;
  ProcMem& operator=(const ProcMem&) = delete;
  ~ProcMem() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  int open_errno() const { return err_; }

  bool read(uint64_t addr, void* buf, size_t len) const {
    if (fd_ < 0 || addr > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) - len) return false;
    auto* p = static_cast<char*>(buf);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd_, p + done, len - done, static_cast<off_t>(addr + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  template <typename T>
  std::optional<T> get(uint64_t addr) const {
    T v{};
    if (!read(addr, &v, sizeof(v))) return std::nullopt;
    return v;
  }

 private:
  int fd_ = -1;
  int err_ = 0;
};

template <typename T>
T field(const unsigned char* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(v));
  return v;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A compact str object (PyASCIIObject: length +16, state +32) as UTF-8, cut
// at kMaxString bytes; nullopt when unreadable or not a compact string.
std::optional<std::string> read_py_string(const ProcMem& mem, uint64_t addr, const PyOffsets& o) {
  if (addr == 0) return std::nullopt;
  unsigned char hdr[40];
  if (!mem.read(addr, hdr, sizeof(hdr))) return std::nullopt;
  auto length = field<int64_t>(hdr, 16);
  auto state = field<uint32_t>(hdr, 32);
  uint32_t kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0 || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1)) return std::nullopt;
  uint64_t data = addr + (ascii ? o.ascii_size : o.compact_size);
  size_t n = std::min<size_t>(static_cast<size_t>(length), kMaxString);
  std::vector<unsigned char> raw(n * kind);
  if (n > 0 && !mem.read(data, raw.data(), raw.size())) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp = kind == 1   ? raw[i]
                  : kind == 2 ? field<uint16_t>(raw.data(), 2 * i)
                              : field<uint32_t>(raw.data(), 4 * i);
    size_t before = out.size();
    append_utf8(out, cp);
    if (out.size() > kMaxString) {
      out.resize(before);  // never half a character
      break;
    }
  }
  return out;
}

Error unsupported(uint32_t pid, int major, int minor) {
  return make_error("process " + std::to_string(pid) + ": Python " + std::to_string(major) + "." +
                    std::to_string(minor) + " is not supported (3.11, 3.12)");
}

// The process layout from the ELF that exports _PyRuntime, mapped at `m`.
Result<PythonProcess> describe(const SysRoot& root, uint32_t pid, const MapEntry& m, const PyElf& elf) {
  std::string who = "process " + std::to_string(pid);
  auto bias = load_bias(elf, m);
  if (!bias) return make_error(who + ": " + m.path + " is mapped at a file offset outside its PT_LOAD segments");
  auto named = version_from_name(basename_of(m.path));
  if (!elf.version) {  // Py_Version is new in 3.11
    if (named) return unsupported(pid, named->first, named->second);
    return make_error(who + ": " + m.path +
                      " has _PyRuntime but no Py_Version: Python before 3.11 is not supported (3.11, 3.12)");
  }
  ProcMem mem(root, pid);
  if (!mem.ok()) return make_error(who + ": cannot open its memory: " + std::strerror(mem.open_errno()));
  auto hex = mem.get<uint64_t>(*elf.version + *bias);
  if (!hex) return make_error(who + ": cannot read Py_Version from its memory");
  int major = static_cast<int>((*hex >> 24) & 0xff), minor = static_cast<int>((*hex >> 16) & 0xff);
  const PyOffsets* o = offsets_for(major, minor);
  if (!o) return unsupported(pid, major, minor);
  if (!elf.code_type) return make_error(who + ": " + m.path + " exports no PyCode_Type");

  PythonProcess py;
  py.major = major;
  py.minor = minor;
  py.runtime_addr = *elf.runtime + *bias;
  py.code_type_addr = *elf.code_type + *bias;
  py.binary = m.path;
  st_py_proc& l = py.layout;
  l.tss_key_addr = py.runtime_addr + o->runtime_tss_key + 4;
  l.tss_base = kGlibcTssBase;
  l.tss_stride = kGlibcTssStride;
  l.tstate_cframe = o->tstate_cframe;
  l.cframe_current = o->cframe_current;
  l.frame_code = o->frame_code;
  l.frame_previous = o->frame_previous;
  l.frame_owner = o->frame_owner;
  // The BPF side reads only glibc's first block of keys.
  auto tss = mem.get<PyTss>(py.runtime_addr + o->runtime_tss_key);
  if (!tss) return make_error(who + ": cannot read _PyRuntime from its memory");
  if (tss->initialized != 0 && tss->key >= static_cast<uint32_t>(kGlibcFirstBlockKeys))
    return make_error(who + ": the interpreter's TSS key " + std::to_string(tss->key) +
                      " is past glibc's first block of keys (32)");
  return py;
}

}  // namespace

Result<PythonProcess> find_python(const SysRoot& root, uint32_t pid) {
  std::string who = "process " + std::to_string(pid);
  std::string dir = proc_dir(root, pid);
  auto maps = read_small_file(dir + "/maps", kMapsLimit);
  if (!maps) {
    if (!root.pid_exists(pid)) return make_error(who + " does not exist");
    return make_error(who + ": cannot read " + dir + "/maps");
  }
  struct stat exe {};
  uint64_t exe_inode = ::stat((dir + "/exe").c_str(), &exe) == 0 ? exe.st_ino : 0;

  std::set<std::string> seen;
  std::optional<std::pair<int, int>> other_python;  // a python-named file without _PyRuntime (2.x)
  std::string last_error;
  for (const MapEntry& m : parse_proc_maps(*maps)) {
    if (!m.is_file() || !seen.insert(m.path).second) continue;
    std::string base = basename_of(m.path);
    bool is_exe = exe_inode != 0 && m.inode == exe_inode;
    if (!is_exe && !python_named(base)) continue;
    auto file = mapped_file_path(root, pid, m);
    if (!file) {
      last_error = m.path + ": cannot open it through " + dir;
      continue;
    }
    auto elf = read_py_elf(*file);
    if (!elf) {
      last_error = elf.error().message;
      continue;
    }
    if (elf->runtime) return describe(root, pid, m, *elf);
    if (python_named(base) && !other_python) other_python = version_from_name(base);
  }
  if (other_python) return unsupported(pid, other_python->first, other_python->second);
  if (!last_error.empty())
    return make_error(who + ": not a Python process, as far as can be read (" + last_error + ")");
  return make_error(who + ": not a Python process");
}

std::optional<std::string> python_code_name(const SysRoot& root, uint32_t pid, uint64_t code_addr,
                                            const PythonProcess& py) {
  const PyOffsets* o = offsets_for(py.major, py.minor);
  if (!o || code_addr == 0 || py.code_type_addr == 0) return std::nullopt;
  ProcMem mem(root, pid);
  unsigned char code[kCodeReadSize];
  if (!mem.read(code_addr, code, sizeof(code))) return std::nullopt;
  if (field<uint64_t>(code, 8) != py.code_type_addr) return std::nullopt;  // ob_type
  auto qualname = read_py_string(mem, field<uint64_t>(code, o->co_qualname), *o);
  auto filename = read_py_string(mem, field<uint64_t>(code, o->co_filename), *o);
  if (!qualname || !filename) return std::nullopt;
  int32_t line = field<int32_t>(code, o->co_firstlineno);
  return *qualname + " (" + *filename + ":" + std::to_string(line) + ")";
}

}  // namespace steptrace::symbols
