// SPDX-License-Identifier: Apache-2.0
#include "support/shell.h"

#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace steptrace::test {

ShellResult sh(const std::string& cmd) {
  ShellResult o;
  auto t0 = std::chrono::steady_clock::now();
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(f != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) o.out.append(buf.data(), n);
  int st = pclose(f);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace steptrace::test
