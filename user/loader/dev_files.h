// SPDX-License-Identifier: Apache-2.0
// Device files named on the command line (--accel-dev, --rdma-dev): checked
// before anything loads, then handed to the BPF side as they appear (a
// simulated device is often mounted after tracing starts). Matched on the
// file's own node (s_dev, inode), so a device node and a FUSE file behave
// the same. Shared by sessions and the daemon.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace steptrace {

class BpfTracer;

class DevFileSet {
 public:
  DevFileSet() = default;
  DevFileSet(const std::vector<std::string>& accel, const std::vector<std::string>& rdma);

  uint32_t size() const { return static_cast<uint32_t>(files_.size()); }
  bool has_rdma() const;
  bool pending() const;  // some file has not appeared yet
  std::vector<std::string> pending_paths() const;
  // A file that does not exist and cannot appear (no such directory) is a user error.
  Status validate() const;
  // Hands every file that exists now and was not handed yet to the tracer.
  Status resolve(BpfTracer& tracer, bool first_time);
  // Messages for files that never appeared.
  std::vector<std::string> never_appeared() const;

 private:
  struct File {
    std::string path;
    bool rdma = false;
    uint32_t index = 0;  // position within its option
    bool resolved = false;
  };
  static const char* option(const File& f) { return f.rdma ? "--rdma-dev" : "--accel-dev"; }
  std::vector<File> files_;
};

}  // namespace steptrace
