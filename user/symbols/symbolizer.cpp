// SPDX-License-Identifier: Apache-2.0
#include "symbols/symbolizer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <tuple>
#include <utility>

#include "loader/kernel_text.h"

namespace steptrace::symbols {
namespace {

constexpr size_t kMapsLimit = 64u << 20;
constexpr size_t kKallsymsLimit = 256u << 20;
constexpr uint64_t kVdsoLimit = 1u << 20;

std::string module_name(const MapEntry& m) {
  if (m.path.empty() || m.path.front() == '[') return m.path;
  return m.path.substr(m.path.rfind('/') + 1);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// "f:dev:ino:size:mtime": the file's identity when it has no build id.
std::string file_identity(const struct stat& st) {
  return "f:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

size_t leading_underscores(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && s[n] == '_') ++n;
  return n;
}

// Global before weak before local, at one address.
int kallsyms_rank(char type) {
  switch (type) {
    case 'T': return 0;
    case 'W': return 1;
    case 't': return 2;
    default: return 3;
  }
}

}  // namespace

std::string Frame::display() const {
  if (resolved()) return function;
  if (!module.empty()) return module + "+" + hex(offset);
  return "[unknown]";
}

Symbolizer::Symbolizer(SysRoot root) : root_(std::move(root)) {}

Symbolizer::~Symbolizer() {
  for (const auto& [identity, fd] : pending_) ::close(fd);
}

void Symbolizer::load_deferred() {
  for (const auto& [identity, fd] : pending_) {
    auto r = ElfSymbols::load("/proc/self/fd/" + std::to_string(fd));
    std::shared_ptr<const ElfSymbols> elf;
    if (r) elf = intern(std::make_shared<const ElfSymbols>(std::move(*r)), identity);
    by_identity_[identity] = elf;
    ::close(fd);
  }
  pending_.clear();
  for (auto& [pid, maps] : procs_)
    for (auto& m : maps)
      if (!m.elf && !m.identity.empty()) {
        if (auto it = by_identity_.find(m.identity); it != by_identity_.end()) m.elf = it->second;
        m.identity.clear();
      }
}

Status Symbolizer::snapshot(uint32_t pid) {
  std::string maps_path = root_.proc() + "/" + std::to_string(pid) + "/maps";
  auto text = read_small_file(maps_path, kMapsLimit);
  if (!text) return make_error("process " + std::to_string(pid) + " is gone (cannot read " + maps_path + ")");
  std::vector<Mapping> maps;
  for (const MapEntry& m : parse_proc_maps(*text)) {
    Mapping out{m.start, m.end, m.pgoff, module_name(m), nullptr, {}};
    if (m.is_file()) out.elf = load_file(pid, m, &out.identity);
    else if (m.path == "[vdso]") out.elf = load_vdso(pid, m);
    maps.push_back(std::move(out));
  }
  std::sort(maps.begin(), maps.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  procs_[pid] = std::move(maps);
  return Ok{};
}

std::optional<std::string> mapped_file_path(const SysRoot& root, uint32_t pid, const MapEntry& m, struct stat* out) {
  const std::string dir = root.proc() + "/" + std::to_string(pid);
  char range[48];
  std::snprintf(range, sizeof(range), "%llx-%llx", static_cast<unsigned long long>(m.start),
                static_cast<unsigned long long>(m.end));
  std::vector<std::string> candidates{dir + "/map_files/" + range};
  if (!m.deleted) candidates.push_back(dir + "/root" + m.path);
  for (size_t i = 0; i < candidates.size(); ++i) {
    struct stat st {};
    if (::stat(candidates[i].c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (i > 0 && m.inode != 0 && st.st_ino != m.inode) continue;  // another file now has that name
    if (out) *out = st;
    return candidates[i];
  }
  return std::nullopt;
}

std::shared_ptr<const ElfSymbols> Symbolizer::load_file(uint32_t pid, const MapEntry& m,
                                                        std::string* pending_identity) {
  // Descriptors kept open for deferred files, at most (past it, files load at once):
  constexpr size_t kMaxPending = 256;  // beside a perf event per CPU (192 on trn2) under the usual 1024
  struct stat st {};
  const auto path = mapped_file_path(root_, pid, m, &st);
  if (!path) return nullptr;
  std::string identity = file_identity(st);
  if (auto it = by_identity_.find(identity); it != by_identity_.end()) return it->second;
  if (deferred_ && pending_.count(identity)) {
    *pending_identity = identity;
    return nullptr;
  }
  if (deferred_ && pending_.size() < kMaxPending) {
    const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      pending_[identity] = fd;
      *pending_identity = identity;
      return nullptr;
    }
  }
  auto r = ElfSymbols::load(*path);
  std::shared_ptr<const ElfSymbols> elf;
  if (r) elf = intern(std::make_shared<const ElfSymbols>(std::move(*r)), identity);
  by_identity_[identity] = elf;  // a failure too: not retried until the file changes
  return elf;
}

// The vDSO is in no file: read its ELF image from the process's memory.
std::shared_ptr<const ElfSymbols> Symbolizer::load_vdso(uint32_t pid, const MapEntry& m) {
  uint64_t len = m.end - m.start;
  if (len == 0 || len > kVdsoLimit) return nullptr;
  std::string path = root_.proc() + "/" + std::to_string(pid) + "/mem";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  std::string image(len, '\0');
  ssize_t n = ::pread(fd, image.data(), len, static_cast<off_t>(m.start));
  ::close(fd);
  if (n != static_cast<ssize_t>(len)) return nullptr;
  auto r = ElfSymbols::load_image(image);
  if (!r) return nullptr;
  return intern(std::make_shared<const ElfSymbols>(std::move(*r)), "");
}

// One entry per build id: the same library seen through two paths, two
// containers or two processes is loaded once. Without a build id the file's
// identity is the key ("" for an image with neither: not cached).
std::shared_ptr<const ElfSymbols> Symbolizer::intern(std::shared_ptr<const ElfSymbols> elf,
                                                     const std::string& identity) {
  std::string key = elf->build_id().empty() ? identity : "b:" + elf->build_id();
  if (key.empty()) return elf;
  auto [it, inserted] = files_.emplace(key, std::move(elf));
  return it->second;
}

bool Symbolizer::has_snapshot(uint32_t pid) const { return procs_.count(pid) != 0; }

void Symbolizer::forget(uint32_t pid) { procs_.erase(pid); }

size_t Symbolizer::cached_files() const { return files_.size(); }

Frame Symbolizer::resolve_user(uint32_t pid, uint64_t ip) const {
  Frame f;
  f.offset = ip;
  auto p = procs_.find(pid);
  if (p == procs_.end()) return f;
  const auto& maps = p->second;
  auto it = std::upper_bound(maps.begin(), maps.end(), ip, [](uint64_t v, const Mapping& m) { return v < m.start; });
  if (it == maps.begin()) return f;
  --it;
  if (ip >= it->end) return f;
  f.module = it->module;
  f.offset = ip - it->start + it->pgoff;
  if (!it->elf) return f;
  uint64_t vaddr = ip;
  if (!it->elf->is_exec()) {
    auto v = it->elf->offset_to_vaddr(f.offset);
    if (!v) return f;
    vaddr = *v;
  }
  if (auto hit = it->elf->lookup(vaddr)) {
    f.function = std::move(hit->name);
    f.offset = hit->offset;
  }
  return f;
}

// Text symbols (t, T, w, W) by address, one per address. With kptr_restrict
// every address reads 0: none is kept and every kernel frame is "[unknown]".
// Read in pieces and parsed line by line: only the kept names are held, never
// the whole text (5-15 MiB).
void Symbolizer::load_kallsyms() const {
  kallsyms_loaded_ = true;
  ksyms_.clear();
  ksym_names_.clear();
  ksym_modules_.assign(1, std::string());
  kernel_last_ = 0;
  const int fd = ::open((root_.proc() + "/kallsyms").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct Parsed {
    KernelSym sym;
    char type;
  };
  std::vector<Parsed> syms;
  std::string names;  // grows while parsing; views into it are taken after
  auto module_index = [&](std::string_view m) -> uint16_t {
    if (m.empty()) return 0;
    for (size_t i = 1; i < ksym_modules_.size(); ++i)
      if (ksym_modules_[i] == m) return static_cast<uint16_t>(i);
    if (ksym_modules_.size() > UINT16_MAX) return 0;  // cannot happen: a host has hundreds
    ksym_modules_.emplace_back(m);
    return static_cast<uint16_t>(ksym_modules_.size() - 1);
  };
  auto take_line = [&](std::string_view line) {
    auto e = parse_kallsyms_line(line);
    if (!e || (e->type != 't' && e->type != 'T' && e->type != 'w' && e->type != 'W')) return;
    if (e->name.size() > UINT16_MAX || names.size() + e->name.size() > UINT32_MAX) return;
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.find(' '), addr, 16);
    if (ec != std::errc() || addr == 0) return;
    syms.push_back({KernelSym{addr, static_cast<uint32_t>(names.size()), static_cast<uint16_t>(e->name.size()),
                              module_index(e->module)},
                    e->type});
    names.append(e->name);
  };
  std::string carry;  // a line split across two reads
  char buf[64 * 1024];
  size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    total += static_cast<size_t>(n);
    std::string_view piece(buf, static_cast<size_t>(n));
    while (!piece.empty()) {
      const size_t nl = piece.find('\n');
      if (nl == std::string_view::npos) {
        carry.append(piece);
        break;
      }
      if (carry.empty()) {
        take_line(piece.substr(0, nl));
      } else {
        carry.append(piece.substr(0, nl));
        take_line(carry);
        carry.clear();
      }
      piece.remove_prefix(nl + 1);
    }
    if (total >= kKallsymsLimit) break;
  }
  ::close(fd);
  if (!carry.empty()) take_line(carry);
  auto name_of = [&](const KernelSym& k) { return std::string_view(names).substr(k.name_at, k.name_len); };
  auto key = [&](const Parsed& s) {
    return std::make_tuple(s.sym.addr, leading_underscores(name_of(s.sym)), kallsyms_rank(s.type), name_of(s.sym));
  };
  std::sort(syms.begin(), syms.end(), [&](const Parsed& a, const Parsed& b) { return key(a) < key(b); });
  // One per address; the kept names copied into a table of exactly their size.
  size_t kept = 0, kept_bytes = 0;
  for (size_t i = 0; i < syms.size(); ++i)
    if (i == 0 || syms[i].sym.addr != syms[i - 1].sym.addr) {
      ++kept;
      kept_bytes += syms[i].sym.name_len;
    }
  ksyms_.reserve(kept);
  ksym_names_.reserve(kept_bytes);
  for (size_t i = 0; i < syms.size(); ++i) {
    if (i != 0 && syms[i].sym.addr == syms[i - 1].sym.addr) continue;
    KernelSym k = syms[i].sym;
    const std::string_view name = name_of(k);
    k.name_at = static_cast<uint32_t>(ksym_names_.size());
    ksym_names_.append(name);
    ksyms_.push_back(k);
    if (k.module == 0) kernel_last_ = ksyms_.size();
  }
}

Frame Symbolizer::resolve_kernel(uint64_t ip) const {
  if (!kallsyms_loaded_) load_kallsyms();
  Frame f;
  f.offset = ip;
  auto it = std::upper_bound(ksyms_.begin(), ksyms_.end(), ip, [](uint64_t v, const KernelSym& s) { return v < s.addr; });
  if (it == ksyms_.begin()) return f;
  --it;
  // Past the kernel image's last symbol and before any module's: no function.
  bool last_of_image = it->module == 0 && static_cast<size_t>(it - ksyms_.begin()) + 1 == kernel_last_;
  if (last_of_image && ip > it->addr) return f;
  f.function = std::string(ksym_name(*it));
  f.module = it->module == 0 ? "[kernel]" : ksym_modules_[it->module];
  f.offset = ip - it->addr;
  return f;
}

}  // namespace steptrace::symbols
