// SPDX-License-Identifier: Apache-2.0
// CPython processes for the stack sampler (user/symbols/python_procs.h): a
// live python3 child found, its st_py_proc layout checked against its own
// memory (TSS key, interpreter list, the frame chain of its sleeping
// thread), code objects named. Reading a child's /proc/PID/mem needs root
// (or ptrace rights): those tests are [root]. Other interpreters (pyenv's
// --enable-shared 3.10-3.13) are used when present, skipped otherwise.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/shell.h"
#include "support/workload.h"
#include "symbols/python_procs.h"
#include "util/sys_root.h"

using namespace steptrace;
using namespace steptrace::symbols;

namespace {

// Prints the addresses of three code objects: Outer.alpha_fn (line 3), a
// non-ASCII qualname (UCS-2 text, line 7) and a 600-character name (line 1
// of its exec'd source), then sleeps inside alpha_fn.
constexpr const char* kScript =
    "import time\n"
    "class Outer:\n"
    "    def alpha_fn(self):\n"
    "        print(id(Outer.alpha_fn.__code__), id(\u00d6lig.\u51fd\u6570.__code__),\n"
    "              id(globals()['x' * 600].__code__), flush=True); time.sleep(600)\n"
    "class \u00d6lig:\n"
    "    def \u51fd\u6570(self): pass\n"
    "exec('def ' + 'x' * 600 + '(): pass')\n"
    "Outer().alpha_fn()\n";

// `interpreter -I -c kScript`, killed and reaped on destruction; line() is
// the first line it printed (the code object's address), "" if none in 20 s.
class PyChild {
 public:
  explicit PyChild(const std::string& interpreter) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    const char* argv[] = {interpreter.c_str(), "-I", "-c", kScript, nullptr};
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(fds[1]);
    read_line(fds[0]);
    ::close(fds[0]);
  }
  PyChild(const PyChild&) = delete;
  PyChild& operator=(const PyChild&) = delete;
  ~PyChild() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  uint32_t pid() const { return static_cast<uint32_t>(pid_); }
  const std::string& line() const { return line_; }
  // The i-th address printed (0 if missing).
  uint64_t code_addr(int i) const {
    std::istringstream in(line_);
    uint64_t v = 0;
    for (int k = 0; k <= i; ++k) {
      if (!(in >> v)) return 0;
    }
    return v;
  }

 private:
  void read_line(int fd) {
    std::string buf;
    while (buf.find('\n') == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20000) <= 0) return;
      char tmp[256];
      ssize_t n = ::read(fd, tmp, sizeof(tmp));
      if (n <= 0) return;
      buf.append(tmp, static_cast<size_t>(n));
    }
    line_ = buf.substr(0, buf.find('\n'));
  }
  pid_t pid_ = -1;
  std::string line_;
};

// (minor) of `python --version` when it is 3.11 or 3.12.
std::optional<int> supported_minor(const std::string& interpreter) {
  if (::access(interpreter.c_str(), X_OK) != 0) return std::nullopt;
  auto r = test::sh(interpreter + " --version");
  int major = 0, minor = 0;
  if (r.rc != 0 || std::sscanf(r.out.c_str(), "Python %d.%d", &major, &minor) != 2) return std::nullopt;
  if (major != 3 || (minor != 11 && minor != 12)) return std::nullopt;
  return minor;
}

// pyenv interpreters of minor version 3.`minor` (each a libpython build).
std::vector<std::string> pyenv_pythons(int minor) {
  std::vector<std::string> roots;
  if (const char* r = std::getenv("PYENV_ROOT")) roots.push_back(r);
  if (const char* h = std::getenv("HOME")) roots.push_back(std::string(h) + "/.pyenv");
  std::vector<std::string> out;
  for (const std::string& root : roots) {
    std::string pattern = root + "/versions/3." + std::to_string(minor) + ".*/bin/python3." + std::to_string(minor);
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (!out.empty()) break;
  }
  return out;
}

template <typename T>
std::optional<T> peek(uint32_t pid, uint64_t addr) {
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  T v{};
  ssize_t n = ::pread(fd, &v, sizeof(v), static_cast<off_t>(addr));
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(v))) return std::nullopt;
  return v;
}

// The frames of the first thread of the first interpreter, innermost first,
// walked as bpf/sample.bpf.c does from its tstate (found here through
// _PyRuntime.interpreters.head -> threads.head instead of the TSS slot).
std::vector<std::string> walk_main_thread(uint32_t pid, const PythonProcess& py) {
  std::vector<std::string> out;
  uint64_t threads_head = py.minor == 11 ? 16 : 72;  // PyInterpreterState.threads.head (DWARF)
  auto interp = peek<uint64_t>(pid, py.runtime_addr + 40);
  auto tstate = interp ? peek<uint64_t>(pid, *interp + threads_head) : std::nullopt;
  auto cframe = tstate ? peek<uint64_t>(pid, *tstate + py.layout.tstate_cframe) : std::nullopt;
  auto frame = cframe ? peek<uint64_t>(pid, *cframe + py.layout.cframe_current) : std::nullopt;
  for (int i = 0; frame && *frame != 0 && i < 32; ++i) {
    auto owner = peek<uint8_t>(pid, *frame + py.layout.frame_owner);
    if (py.layout.frame_owner == 0 || (owner && *owner != 3)) {
      auto code = peek<uint64_t>(pid, *frame + py.layout.frame_code);
      auto name = code ? python_code_name(SysRoot(), pid, *code, py) : std::nullopt;
      out.push_back(name.value_or("?"));
    }
    frame = peek<uint64_t>(pid, *frame + py.layout.frame_previous);
  }
  return out;
}

// Everything find_python and python_code_name promise, on one live child.
void check_interpreter(const std::string& interpreter, int minor) {
  INFO(interpreter);
  PyChild child(interpreter);
  REQUIRE(!child.line().empty());
  auto py = find_python(SysRoot(), child.pid());
  INFO((py ? std::string() : py.error().message));
  REQUIRE(py.ok());
  CHECK(py->major == 3);
  CHECK(py->minor == minor);
  CHECK(py->runtime_addr != 0);
  CHECK(py->code_type_addr != 0);
  CHECK(py->layout.tss_key_addr == py->runtime_addr + (minor == 11 ? 592u : 1544u) + 4);
  CHECK(py->layout.tss_base == 0x318);
  CHECK(py->layout.tss_stride == 16);
  CHECK(py->binary.find("python3." + std::to_string(minor)) != std::string::npos);

  // The TSS key is initialized and in glibc's first block; there is an interpreter.
  auto initialized = peek<int32_t>(child.pid(), py->layout.tss_key_addr - 4);
  auto key = peek<int32_t>(child.pid(), py->layout.tss_key_addr);
  REQUIRE(initialized);
  REQUIRE(key);
  CHECK(*initialized == 1);
  CHECK(*key >= 0);
  CHECK(*key < 32);
  auto interp_head = peek<uint64_t>(child.pid(), py->runtime_addr + 40);
  REQUIRE(interp_head);
  CHECK(*interp_head != 0);

  CHECK(python_code_name(SysRoot(), child.pid(), child.code_addr(0), *py) ==
        std::optional<std::string>("Outer.alpha_fn (<string>:3)"));
  CHECK(python_code_name(SysRoot(), child.pid(), child.code_addr(1), *py) ==
        std::optional<std::string>("\u00d6lig.\u51fd\u6570 (<string>:7)"));
  // Cut at 512 bytes.
  CHECK(python_code_name(SysRoot(), child.pid(), child.code_addr(2), *py) ==
        std::optional<std::string>(std::string(512, 'x') + " (<string>:1)"));
  // Not code objects: unmapped, the runtime struct, a misaligned pointer.
  CHECK_FALSE(python_code_name(SysRoot(), child.pid(), 0x10, *py));
  CHECK_FALSE(python_code_name(SysRoot(), child.pid(), py->runtime_addr, *py));
  CHECK_FALSE(python_code_name(SysRoot(), child.pid(), child.code_addr(0) + 8, *py));
  CHECK_FALSE(python_code_name(SysRoot(), child.pid(), ~0ull - 64, *py));

  // The layout's frame offsets: the sleeping thread is in alpha_fn, called from the module.
  auto frames = walk_main_thread(child.pid(), *py);
  REQUIRE(frames.size() >= 2);
  CHECK(frames[0] == "Outer.alpha_fn (<string>:3)");
  CHECK(frames[1] == "<module> (<string>:1)");
  CHECK(frames.size() == 2);
}

}  // namespace

TEST_CASE("find_python: a process that is not Python, or not there", "[symbols][python]") {
  auto self = find_python(SysRoot(), static_cast<uint32_t>(::getpid()));
  REQUIRE_FALSE(self.ok());
  CHECK_THAT(self.error().message, Catch::Contains("not a Python process"));

  auto gone = find_python(SysRoot(), 0x7ffffff0u);
  REQUIRE_FALSE(gone.ok());
  CHECK_THAT(gone.error().message, Catch::Contains("does not exist"));

  // A fake proc root without the pid.
  auto fake = find_python(SysRoot("/nonexistent-proc"), 1);
  CHECK_FALSE(fake.ok());
}

TEST_CASE("find_python and python_code_name on the system python3", "[symbols][python][root]") {
  test::require_root();
  const std::string interpreter = "/usr/bin/python3";
  auto minor = supported_minor(interpreter);
  if (!minor) {
    WARN(interpreter + " is missing or not CPython 3.11/3.12: skipped");
    return;
  }
  check_interpreter(interpreter, *minor);
}

TEST_CASE("find_python and python_code_name on libpython builds (pyenv)", "[symbols][python][root]") {
  test::require_root();
  int found = 0;
  for (int minor : {11, 12}) {
    for (const std::string& interpreter : pyenv_pythons(minor)) {
      if (supported_minor(interpreter) != minor) continue;
      ++found;
      check_interpreter(interpreter, minor);
    }
  }
  if (found == 0) WARN("no pyenv CPython 3.11/3.12: skipped");
}

TEST_CASE("find_python refuses other CPython versions", "[symbols][python][root]") {
  test::require_root();
  int found = 0;
  for (int minor : {10, 13}) {
    for (const std::string& interpreter : pyenv_pythons(minor)) {
      INFO(interpreter);
      PyChild child(interpreter);
      REQUIRE(!child.line().empty());
      auto py = find_python(SysRoot(), child.pid());
      REQUIRE_FALSE(py.ok());
      CHECK_THAT(py.error().message,
                 Catch::Contains("Python 3." + std::to_string(minor) + " is not supported (3.11, 3.12)"));
      ++found;
    }
  }
  if (found == 0) WARN("no pyenv CPython 3.10/3.13: skipped");
}
