// SPDX-License-Identifier: Apache-2.0
// Report files written by root (--json, --html, --perfetto) are created as
// the captures are: never through a symbolic link, never over an existing
// file unless asked (--force), complete or not at all (a private temporary
// file in the same directory, fsync, then an atomic rename), mode 0600
// unless asked otherwise (--output-mode).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "util/result.h"

namespace steptrace {

struct OutputFileOptions {
  bool force = false;   // replace an existing regular file (a symlink is still refused)
  mode_t mode = 0600;
};

// The same refusals as write_output_file, before any work: a session that
// traced for an hour must not end on "exists: not overwritten".
Status check_output_path(const std::string& path, const OutputFileOptions& o = {});
Status write_output_file(const std::string& path, std::string_view text, const OutputFileOptions& o = {});

}  // namespace steptrace
