// SPDX-License-Identifier: Apache-2.0
// [root] What a hostile host throws at the sinks, through the steptrace
// binary: a traced process named with invalid UTF-8 and an escape sequence,
// and output paths that are symlinks or existing files.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/shell.h"
#include "support/workload.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace {

const std::string kBin = STEPTRACE_BIN;

using steptrace::test::sh;
std::string slurp(const fs::path& p) { return steptrace::test::slurp(p.string()); }

fs::path temp_dir() {
  char tmpl[] = "/tmp/steptrace-hostile.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("hostile: a thread named with invalid UTF-8 and an escape sequence leaves every output valid",
          "[root][hostile]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  // The shell renames itself: 0xff, ESC [ 2 J (clear screen), and a 3-byte
  // character cut after 2 bytes, as the kernel's 15-byte cut does.
  const std::string job =
      "sh -c 'printf \"\\377\\033[2Jevil\\342\\202\" > /proc/$$/comm; i=0; while [ $i -lt 3000 ]; do i=$((i+1)); "
      "done; sleep 0.1'";
  auto r = sh(kBin + " run --collectors sched --json " + (dir / "r.json").string() + " --html " +
              (dir / "r.html").string() + " --perfetto " + (dir / "r.trace.json").string() + " -v -- " + job);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  // The terminal report: the name is there, written out, with no raw ESC.
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("\\x1b[2Jevil") != std::string::npos);
  CHECK(steptrace::valid_utf8(r.out) == r.out);
  // JSON and Perfetto parse (nlohmann rejects invalid UTF-8) and hold the name.
  auto j = nlohmann::json::parse(slurp(dir / "r.json"));
  bool found = false;
  for (const auto& t : j["threads"])
    if (t["comm"].get<std::string>().find("\\x1b[2Jevil") != std::string::npos) found = true;
  CHECK(found);
  auto trace = slurp(dir / "r.trace.json");
  CHECK_NOTHROW(nlohmann::json::parse(trace));
  CHECK(trace.find("evil") != std::string::npos);
  auto html = slurp(dir / "r.html");
  CHECK(steptrace::valid_utf8(html) == html);
  CHECK(html.find('\x1b') == std::string::npos);
  // Report files are private by default.
  struct stat st {};
  REQUIRE(::stat((dir / "r.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  fs::remove_all(dir);
}

TEST_CASE("hostile: an output path that is a symlink is not followed, an existing file is not overwritten",
          "[root][hostile]") {
  steptrace::test::require_root();
  auto dir = temp_dir();
  {
    std::ofstream victim(dir / "victim");
    victim << "precious\n";
  }
  fs::create_symlink(dir / "victim", dir / "link.json");
  auto r = sh(kBin + " run --collectors sched --json " + (dir / "link.json").string() + " -- echo JOB-RAN");
  CHECK(r.rc == 1);
  CHECK(r.out.find("symbolic link: not followed") != std::string::npos);
  CHECK(r.out.find("JOB-RAN") == std::string::npos);  // refused before anything ran
  CHECK(slurp(dir / "victim") == "precious\n");
  r = sh(kBin + " run --collectors sched --html " + (dir / "link.json").string() + " --force -- true");
  CHECK(r.rc == 1);
  CHECK(slurp(dir / "victim") == "precious\n");
  CHECK(fs::is_symlink(dir / "link.json"));

  {
    std::ofstream existing(dir / "old.json");
    existing << "old\n";
  }
  r = sh(kBin + " run --collectors sched --json " + (dir / "old.json").string() + " -- true");
  CHECK(r.rc == 1);
  CHECK(r.out.find("exists: not overwritten") != std::string::npos);
  CHECK(slurp(dir / "old.json") == "old\n");
  r = sh(kBin + " run --collectors sched --force --output-mode 0640 --json " + (dir / "old.json").string() +
         " -- true");
  CHECK(r.rc == 0);
  CHECK_NOTHROW(nlohmann::json::parse(slurp(dir / "old.json")));
  struct stat st {};
  REQUIRE(::stat((dir / "old.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  // No temporary file is left beside it.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename().string().rfind(".old", 0) == 0;
  CHECK(entries == 0);
  fs::remove_all(dir);
}
