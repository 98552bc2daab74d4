// SPDX-License-Identifier: Apache-2.0
#include "util/output_file.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace steptrace {

namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return Error{fmt::format("cannot write {}: {} ({})", path, what, std::strerror(err))};
}

}  // namespace

Status check_output_path(const std::string& path, const OutputFileOptions& o) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return make_error(fmt::format("{} is a symbolic link: not followed, not replaced (remove it first)", path));
    if (!S_ISREG(st.st_mode)) return make_error(fmt::format("{} exists and is not a regular file", path));
    if (!o.force) return make_error(fmt::format("{} exists: not overwritten (--force replaces it)", path));
  } else if (errno != ENOENT) {
    return io_error("lstat", path, errno);
  }
  return Ok{};
}

Status write_output_file(const std::string& path, std::string_view text, const OutputFileOptions& o) {
  if (auto st = check_output_path(path, o); !st) return st;
  // The temporary file: a fresh name in the same directory (so the rename is
  // atomic), created with O_EXCL by mkostemp: a planted name or link fails it.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmpl = (slash == std::string::npos ? "" : dir) + "." + base + ".XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return io_error("create a temporary file", path, errno);
  const std::string tmp = name.data();
  auto fail = [&](const char* what) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return io_error(what, path, e);
  };
  for (size_t off = 0; off < text.size();) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write");
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd, o.mode) != 0) return fail("chmod");
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return io_error("close", path, e);
  }
  // Without --force nothing may have appeared there since the check.
  const unsigned flags = o.force ? 0 : RENAME_NOREPLACE;
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), flags) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    if (e == EEXIST) return make_error(fmt::format("{} exists: not overwritten (--force replaces it)", path));
    return io_error("rename", path, e);
  }
  return Ok{};
}

}  // namespace steptrace
