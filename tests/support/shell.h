// SPDX-License-Identifier: Apache-2.0
// The steptrace binary (and other commands) end to end from tests: one shell
// command with its combined output, exit code and wall time; a file's bytes.
#pragma once

#include <string>

namespace steptrace::test {

struct ShellResult {
  int rc = -1;          // exit code, 128+N when signal N ended it
  std::string out;      // stdout and stderr together
  double seconds = 0;   // wall time
};

ShellResult sh(const std::string& cmd);
std::string slurp(const std::string& path);

}  // namespace steptrace::test
