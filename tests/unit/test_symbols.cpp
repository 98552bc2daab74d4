// SPDX-License-Identifier: Apache-2.0
// The native-stack symbolizer (user/symbols/): the /proc/PID/maps parser,
// ELF symbol tables, the per-process view and kallsyms, on this very test
// binary, its libc and fake /proc trees.
#include <catch2/catch.hpp>

#include "symbols/elf_symbols.h"
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"
#include "util/sys_root.h"

#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

using namespace steptrace;
using namespace steptrace::symbols;

// Functions of this file, looked up by address below: not inlined, not merged.
extern "C" __attribute__((noinline, used)) int steptrace_symbols_test_marker(int x) {
  volatile int v = x;
  return v * 3 + 1;
}

namespace st_symtest {
__attribute__((noinline, used)) int cpp_marker(int x) {
  volatile int v = x;
  return v * 5 + 7;
}
}  // namespace st_symtest

namespace {

std::string tmp_path(const std::string& name) {
  return "/tmp/steptrace-test-" + std::to_string(getpid()) + "-symbols-" + name;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// This executable's load bias (0 for ET_EXEC): runtime address - ELF vaddr.
uint64_t main_load_bias() {
  uint64_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<uint64_t*>(out) = info->dlpi_addr;
        return 1;  // the first entry is the main program
      },
      &bias);
  return bias;
}

uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A fake /proc with one process: maps text and a kallsyms text.
struct FakeProc {
  std::string root = tmp_path("proc");
  explicit FakeProc(const std::string& maps, const std::string& kallsyms = {}) {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root + "/4242");
    write_file(root + "/4242/maps", maps);
    if (!kallsyms.empty()) write_file(root + "/kallsyms", kallsyms);
  }
  ~FakeProc() { std::filesystem::remove_all(root); }
};

}  // namespace

TEST_CASE("symbols: parse_proc_maps keeps executable mappings with their paths", "[symbols]") {
  const char* text =
      "55d0c0a00000-55d0c0a21000 r--p 00000000 103:02 1234                       /usr/bin/python3.11\n"
      "55d0c0a21000-55d0c0b00000 r-xp 00021000 103:02 1234                       /usr/bin/python3.11\n"
      "7f00aa000000-7f00aa100000 r-xp 00010000 fd:1a 5678                       /opt/my app/lib nrt.so.1\n"
      "7f00ab000000-7f00ab001000 r-xp 00002000 103:02 91                         /usr/lib/libmarker.so (deleted)\n"
      "7f00ac000000-7f00ac001000 rw-p 00000000 00:00 0                          [heap]\n"
      "7f00ad000000-7f00ad010000 rwxp 00000000 00:00 0 \n"
      "7ffd1c5f0000-7ffd1c5f2000 r-xp 00000000 00:00 0                          [vdso]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
      "garbage line\n"
      "7f00ae000000 r-xp 00000000 00:00 0 /no/dash\n"
      "7f00af000000-7f00af001000 r-xq 00000000 00:00 0 /bad/perms\n"
      "7f00b0000000-7f00b0001000 r-xp 0000zz00 00:00 0 /bad/offset\n"
      "7f00b1000000-7f00b1001000 r-xp 00000000 0000 0 /bad/dev\n"
      "7f00b2000000-7f00b1001000 r-xp 00000000 00:00 0 /end/before/start\n"
      "\n"
      "7f00b3000000-7f00b3001000 r-xp 00000000 08:01 77 /last/line/no/newline";
  auto maps = parse_proc_maps(text);
  REQUIRE(maps.size() == 7);
  CHECK(maps[0].start == 0x55d0c0a21000);
  CHECK(maps[0].end == 0x55d0c0b00000);
  CHECK(maps[0].pgoff == 0x21000);
  CHECK(maps[0].dev_major == 0x103);
  CHECK(maps[0].dev_minor == 2);
  CHECK(maps[0].inode == 1234);
  CHECK(maps[0].path == "/usr/bin/python3.11");
  CHECK_FALSE(maps[0].deleted);
  CHECK(maps[1].path == "/opt/my app/lib nrt.so.1");
  CHECK(maps[1].dev_major == 0xfd);
  CHECK(maps[1].dev_minor == 0x1a);
  CHECK(maps[2].path == "/usr/lib/libmarker.so");
  CHECK(maps[2].deleted);
  CHECK(maps[3].path.empty());  // anonymous JIT memory
  CHECK_FALSE(maps[3].is_file());
  CHECK(maps[4].path == "[vdso]");
  CHECK(maps[5].path == "[vsyscall]");
  CHECK(maps[5].start == 0xffffffffff600000);
  CHECK(maps[6].path == "/last/line/no/newline");
  CHECK(maps[6].inode == 77);
  CHECK(parse_proc_maps("").empty());
  CHECK(parse_proc_maps("\n\n-\n0-0 r-xp\n").empty());
}

TEST_CASE("symbols: ELF symbols of this test binary", "[symbols]") {
  auto elf = ElfSymbols::load("/proc/self/exe");
  REQUIRE(elf.ok());
  CHECK(elf->has_symtab());
  CHECK(elf->symbol_count() > 100);
  CHECK_FALSE(elf->segments().empty());
  uint64_t bias = main_load_bias();
  uint64_t c_addr = addr_of(reinterpret_cast<const void*>(&steptrace_symbols_test_marker)) - bias;
  auto hit = elf->lookup(c_addr);
  REQUIRE(hit);
  CHECK(hit->name == "steptrace_symbols_test_marker");
  CHECK(hit->offset == 0);
  hit = elf->lookup(c_addr + 4);
  REQUIRE(hit);
  CHECK(hit->name == "steptrace_symbols_test_marker");
  CHECK(hit->offset == 4);
  hit = elf->lookup(addr_of(reinterpret_cast<const void*>(&st_symtest::cpp_marker)) - bias);
  REQUIRE(hit);
  CHECK(hit->name == "st_symtest::cpp_marker(int)");
  CHECK_FALSE(elf->lookup(0).has_value());
  // The GNU build id, as `file`/readelf print it: lowercase hex.
  if (!elf->build_id().empty()) {
    CHECK(elf->build_id().size() >= 16);
    CHECK(elf->build_id().find_first_not_of("0123456789abcdef") == std::string::npos);
  }
  CHECK(demangle("_ZN10st_symtest10cpp_markerEi") == "st_symtest::cpp_marker(int)");
  CHECK(demangle("_Znotvalid") == "_Znotvalid");
  CHECK(demangle("main") == "main");
}

TEST_CASE("symbols: truncated, random and missing files are errors, not crashes", "[symbols]") {
  std::string real = read_file("/bin/true");
  REQUIRE(real.size() > 4096);
  REQUIRE(ElfSymbols::load("/bin/true").ok());
  std::string path = tmp_path("elf");
  for (size_t len : {size_t{0}, size_t{4}, size_t{16}, size_t{64}, size_t{1000}, real.size() / 2, real.size() - 1}) {
    INFO("truncated to " << len << " of " << real.size() << " bytes");
    write_file(path, real.substr(0, len));
    auto r = ElfSymbols::load(path);
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK_FALSE(r.error().message.empty());
  }
  std::mt19937 rng(12345);
  std::string noise(64 * 1024, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write_file(path, noise);
  CHECK_FALSE(ElfSymbols::load(path).ok());
  CHECK_FALSE(ElfSymbols::load_image(noise).ok());
  // An ELF magic in front of noise: an error or an empty table, never a crash.
  for (int round = 0; round < 16; ++round) {
    for (auto& c : noise) c = static_cast<char>(rng());
    noise.replace(0, 7, "\x7f" "ELF\x02\x01\x01", 7);
    write_file(path, noise);
    CHECK_NOTHROW(ElfSymbols::load(path));
    CHECK_NOTHROW(ElfSymbols::load_image(noise));
  }
  std::remove(path.c_str());
  CHECK_FALSE(ElfSymbols::load(tmp_path("does-not-exist")).ok());
  CHECK_FALSE(ElfSymbols::load("/proc").ok());
}

TEST_CASE("symbols: resolve user IPs of this process", "[symbols]") {
  Symbolizer sym;
  uint32_t pid = static_cast<uint32_t>(getpid());
  CHECK_FALSE(sym.has_snapshot(pid));
  CHECK(sym.resolve_user(pid, 0x1234).display() == "[unknown]");
  // An anonymous executable mapping, like JIT code, made before the snapshot.
  void* anon = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(anon != MAP_FAILED);
  REQUIRE(sym.snapshot(pid).ok());
  CHECK(sym.has_snapshot(pid));
  CHECK(sym.cached_files() >= 2);  // this binary and libc at least

  Frame f = sym.resolve_user(pid, addr_of(reinterpret_cast<const void*>(&steptrace_symbols_test_marker)) + 2);
  CHECK(f.function == "steptrace_symbols_test_marker");
  CHECK(f.offset == 2);
  CHECK(f.resolved());
  CHECK(f.display() == "steptrace_symbols_test_marker");
  char exe[4096] = {};
  REQUIRE(readlink("/proc/self/exe", exe, sizeof(exe) - 1) > 0);
  std::string exe_s(exe);
  CHECK(f.module == exe_s.substr(exe_s.rfind('/') + 1));
  CHECK(sym.resolve_user(pid, addr_of(reinterpret_cast<const void*>(&st_symtest::cpp_marker))).function ==
        "st_symtest::cpp_marker(int)");

  f = sym.resolve_user(pid, addr_of(reinterpret_cast<const void*>(&getpid)));
  CHECK(f.module == "libc.so.6");
  CHECK((f.function == "getpid" || f.function == "__getpid"));
  CHECK(f.offset == 0);

  f = sym.resolve_user(pid, addr_of(anon) + 16);
  CHECK_FALSE(f.resolved());
  CHECK(f.module.empty());
  CHECK(f.display() == "[unknown]");
  munmap(anon, 4096);

  // The vDSO: no file, read from memory; its functions have names.
  if (uint64_t vdso = getauxval(AT_SYSINFO_EHDR)) {
    f = sym.resolve_user(pid, vdso);
    CHECK(f.module == "[vdso]");
    std::set<std::string> names;
    for (uint64_t ip = vdso; ip < vdso + 0x4000; ip += 8) {
      Frame v = sym.resolve_user(pid, ip);
      if (v.module == "[vdso]" && v.resolved()) names.insert(v.function);
    }
    bool clock = false;
    for (const auto& n : names) clock = clock || n.find("clock_gettime") != std::string::npos;
    CHECK(clock);
  }

  // The cache is shared: a second snapshot loads nothing new.
  size_t cached = sym.cached_files();
  REQUIRE(sym.snapshot(pid).ok());
  CHECK(sym.cached_files() == cached);
  sym.forget(pid);
  CHECK_FALSE(sym.has_snapshot(pid));
  CHECK_FALSE(sym.resolve_user(pid, addr_of(reinterpret_cast<const void*>(&getpid))).resolved());
  CHECK(sym.cached_files() == cached);
}

TEST_CASE("symbols: a deferred snapshot names nothing until its files are loaded", "[symbols]") {
  Symbolizer sym;
  sym.set_deferred(true);
  uint32_t pid = static_cast<uint32_t>(getpid());
  REQUIRE(sym.snapshot(pid).ok());
  CHECK(sym.cached_files() <= 1);  // only the map was read and the files opened (the vDSO is read at once)
  const uint64_t ip = addr_of(reinterpret_cast<const void*>(&steptrace_symbols_test_marker)) + 2;
  Frame f = sym.resolve_user(pid, ip);
  CHECK_FALSE(f.resolved());
  CHECK_FALSE(f.module.empty());  // the module is known already
  sym.load_deferred();
  CHECK(sym.cached_files() >= 2);
  f = sym.resolve_user(pid, ip);
  CHECK(f.function == "steptrace_symbols_test_marker");
  CHECK(f.offset == 2);
}

TEST_CASE("symbols: a pid that is gone is an error", "[symbols]") {
  Symbolizer sym;
  uint32_t gone = 0x3fffffff;  // above any pid_max
  auto s = sym.snapshot(gone);
  CHECK_FALSE(s.ok());
  CHECK_FALSE(s.error().message.empty());
  CHECK_FALSE(sym.has_snapshot(gone));
}

TEST_CASE("symbols: unreadable files degrade to module+offset", "[symbols]") {
  FakeProc proc(
      "400000-401000 r-xp 00001000 08:01 42 /opt/app/bin/server\n"
      "500000-501000 r-xp 00000000 08:01 43 /opt/app/lib/libgone.so (deleted)\n");
  Symbolizer sym{SysRoot(proc.root)};
  REQUIRE(sym.snapshot(4242).ok());
  Frame f = sym.resolve_user(4242, 0x400010);
  CHECK_FALSE(f.resolved());
  CHECK(f.module == "server");
  CHECK(f.offset == 0x1010);
  CHECK(f.display() == "server+0x1010");
  CHECK(sym.resolve_user(4242, 0x500020).display() == "libgone.so+0x20");
  CHECK(sym.resolve_user(4242, 0x401000).display() == "[unknown]");
  CHECK(sym.cached_files() == 0);
}

TEST_CASE("symbols: kernel IPs from this machine's /proc/kallsyms", "[symbols]") {
  std::string text = read_file("/proc/kallsyms");
  // A T symbol alone at its address, so that no alias can win the name.
  std::map<uint64_t, int> at;
  std::vector<std::pair<uint64_t, std::string>> candidates;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, type, name;
    if (!(ls >> addr >> type >> name) || type.size() != 1 || !std::strchr("tTwW", type[0])) continue;
    uint64_t a = std::stoull(addr, nullptr, 16);
    ++at[a];
    if (type == "T" && a != 0 && line.find('[') == std::string::npos) candidates.emplace_back(a, name);
  }
  if (candidates.empty()) {
    WARN("no /proc/kallsyms text symbols with addresses (kptr_restrict?): the real-kernel check is skipped");
    return;
  }
  const std::pair<uint64_t, std::string>* pick = nullptr;
  for (const auto& c : candidates) {
    auto next = at.upper_bound(c.first);
    if (at[c.first] == 1 && next != at.end() && next->first > c.first + 8) {
      pick = &c;
      break;
    }
  }
  REQUIRE(pick);
  Symbolizer sym;
  Frame f = sym.resolve_kernel(pick->first);
  CHECK(f.function == pick->second);
  CHECK(f.module == "[kernel]");
  CHECK(f.offset == 0);
  f = sym.resolve_kernel(pick->first + 3);
  CHECK(f.function == pick->second);
  CHECK(f.offset == 3);
  CHECK(sym.resolve_kernel(1).display() == "[unknown]");
}

TEST_CASE("symbols: kernel modules, the end of the kernel image and kptr_restrict", "[symbols]") {
  {
    FakeProc proc("",
                  "ffffffff81000000 T _stext\n"
                  "ffffffff81000000 T _text\n"
                  "ffffffff81000010 t helper\n"
                  "ffffffff81000020 D some_data\n"
                  "ffffffff81000100 T _etext\n"
                  "not a kallsyms line\n"
                  "ffffffffc0001000 t mod_fn\t[neuron]\n"
                  "ffffffffc0001100 T mod_fn2\t[neuron]\n");
    Symbolizer sym{SysRoot(proc.root)};
    Frame f = sym.resolve_kernel(0xffffffff81000015);
    CHECK(f.function == "helper");
    CHECK(f.module == "[kernel]");
    CHECK(f.offset == 5);
    CHECK(sym.resolve_kernel(0xffffffff81000030).function == "helper");  // data symbols are not functions
    CHECK(sym.resolve_kernel(0xffffffff81000000).function == "_stext");
    CHECK(sym.resolve_kernel(0xffffffff81000100).function == "_etext");
    CHECK(sym.resolve_kernel(0xffffffff81000200).display() == "[unknown]");  // past the image, in no module
    f = sym.resolve_kernel(0xffffffffc0001004);
    CHECK(f.function == "mod_fn");
    CHECK(f.module == "neuron");
    CHECK(f.offset == 4);
    CHECK(sym.resolve_kernel(0xffffffffc0001180).function == "mod_fn2");
    CHECK(sym.resolve_kernel(0xffffffff80000000).display() == "[unknown]");
  }
  {
    FakeProc proc("", "0000000000000000 T _stext\n0000000000000000 t helper\t[neuron]\n");
    Symbolizer sym{SysRoot(proc.root)};
    CHECK(sym.resolve_kernel(0xffffffff81000015).display() == "[unknown]");
    CHECK_FALSE(sym.resolve_kernel(0).resolved());
  }
  {
    FakeProc proc("");  // no kallsyms at all
    Symbolizer sym{SysRoot(proc.root)};
    CHECK(sym.resolve_kernel(0xffffffff81000015).display() == "[unknown]");
  }
}

// The table is read in 64 KiB pieces: lines that straddle a piece, a last line
// with no newline, and modules interned by name.
TEST_CASE("symbols: a large kallsyms read in pieces keeps every text symbol and its module", "[symbols]") {
  std::string text;
  const int n = 20000;  // ~900 KiB: 14 pieces, most of them ending mid-line
  for (int i = 0; i < n; ++i) {
    char line[96];
    const char* mod = i % 3 == 0 ? "" : (i % 3 == 1 ? "\t[neuron]" : "\t[efa]");
    std::snprintf(line, sizeof(line), "%016llx %c fn_%d_%s%s\n",
                  static_cast<unsigned long long>(0xffffffff81000000ull + 0x100ull * static_cast<unsigned>(i)),
                  i % 2 ? 't' : 'T', i, std::string(static_cast<size_t>(i % 17), 'x').c_str(), mod);
    text += line;
  }
  text += "ffffffff90000000 T last_without_newline";
  FakeProc proc("", text);
  Symbolizer sym{SysRoot(proc.root)};
  int right = 0;
  for (int i = 0; i < n; ++i) {
    Frame f = sym.resolve_kernel(0xffffffff81000000ull + 0x100ull * static_cast<unsigned>(i) + 7);
    const std::string want = "fn_" + std::to_string(i) + "_" + std::string(static_cast<size_t>(i % 17), 'x');
    const char* mod = i % 3 == 0 ? "[kernel]" : (i % 3 == 1 ? "neuron" : "efa");
    if (f.function == want && f.module == mod && f.offset == 7) ++right;
  }
  CHECK(right == n);
  CHECK(sym.resolve_kernel(0xffffffff90000000ull).function == "last_without_newline");
}

TEST_CASE("symbols: Frame display", "[symbols]") {
  CHECK(Frame{"main", "app", 12}.display() == "main");
  CHECK(Frame{"", "libc.so.6", 0x1a2b}.display() == "libc.so.6+0x1a2b");
  CHECK(Frame{"", "", 0x1a2b}.display() == "[unknown]");
}
