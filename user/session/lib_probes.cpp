// SPDX-License-Identifier: Apache-2.0
#include "session/lib_probes.h"

#include <elf.h>
#include <fmt/core.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "loader/tracer.h"
#include "session/session.h"
#include "util/sys_root.h"

namespace steptrace {

int attach_lib_probes(BpfTracer& tracer, const std::string& path, std::vector<std::string>* warnings) {
  struct Probe {
    const char* func;
    uint32_t id;
  };
  const bool marker = path.find("steptrace_marker") != std::string::npos;
  std::vector<Probe> probes;
  if (marker) probes = {{"steptrace_step", ST_UP_STEP_MARKER}};
  else
    probes = {{"nrt_execute", ST_UP_NRT_EXECUTE},
              {"nrt_tensor_write", ST_UP_NRT_TENSOR_WRITE},
              {"nrt_tensor_read", ST_UP_NRT_TENSOR_READ}};
  int attached = 0;
  for (const auto& p : probes) {
    if (auto a = tracer.attach_uprobe(path, p.func, p.id, false); !a) {
      warnings->push_back(a.error().message);
      continue;
    }
    // The marker is a point in time; runtime calls are spans (entry + return).
    if (!marker)
      if (auto r = tracer.attach_uprobe(path, p.func, p.id, true); !r) warnings->push_back(r.error().message);
    ++attached;
  }
  return attached;
}

void LibScanQueue::add(uint32_t pid, uint64_t now_ns) {
  if (pending_.size() >= max_pending_) return;
  pending_.emplace(pid, State{now_ns, now_ns, 20'000'000ull});
}

uint64_t LibScanQueue::next_due_ns() const {
  uint64_t due = UINT64_MAX;
  for (const auto& [pid, st] : pending_) due = std::min(due, st.next_scan_ns);
  return due;
}

std::string MappedLib::key() const { return fmt::format("{:x}:{:x}:{}", dev_major, dev_minor, inode); }

std::string file_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return fmt::format("{:x}:{:x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
}

LibOpenPath resolve_mapped_lib(const std::string& proc_root, uint32_t pid, const MappedLib& lib) {
  const std::string base = proc_root + "/" + std::to_string(pid);
  LibOpenPath out;
  // Through the process's root: the same path walk the job's own open took.
  // The inode number is compared, not the device: on overlayfs stat() shows
  // the overlay's device, the maps the layer's.
  const std::string rooted = base + "/root" + lib.path;
  struct stat st {};
  if (::stat(rooted.c_str(), &st) != 0) {
    out.error = fmt::format("{}: {}", rooted, std::strerror(errno));
  } else if (S_ISREG(st.st_mode) && st.st_ino == lib.inode) {
    out.path = rooted;
    return out;
  } else {
    out.error = fmt::format("{} is another file than the one mapped (inode {}, not {})", rooted, st.st_ino, lib.inode);
  }
  const std::string mapped = base + "/map_files/" + lib.range;
  if (::stat(mapped.c_str(), &st) != 0) {
    out.error += fmt::format("; {}: {}", mapped, std::strerror(errno));
  } else if (!S_ISREG(st.st_mode) || st.st_ino != lib.inode) {
    out.error += fmt::format("; {} is another file than the one mapped", mapped);
  } else {
    out.path = mapped;
  }
  return out;
}

void LibScanQueue::scan(uint64_t now, const std::string& proc_root,
                        const std::function<void(uint32_t, const MappedLib&)>& found) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto& st = it->second;
    if (now < st.next_scan_ns) {
      ++it;
      continue;
    }
    auto maps = read_small_file(proc_root + "/" + std::to_string(it->first) + "/maps", 8 << 20);
    if (!maps) {
      it = pending_.erase(it);
      continue;
    }
    bool found_runtime = false;
    for (const auto& lib : find_mapped_probe_libs(*maps)) {
      found(it->first, lib);
      if (lib.path.find("libnrt") != std::string::npos) found_runtime = true;
    }
    if (found_runtime || now - st.first_seen_ns > 5'000'000'000ull) {
      it = pending_.erase(it);
      continue;
    }
    st.next_scan_ns = now + st.interval_ns;
    st.interval_ns = std::min<uint64_t>(st.interval_ns * 2, 500'000'000ull);
    ++it;
  }
}

// find_probe_libs (the /proc/PID/maps parser) lives in probe_libs.cpp, alone, so it is fuzzed by itself.

// The shared libraries a dynamically linked program will load, as the
// dynamic loader resolves them (what ldd does: LD_TRACE_LOADED_OBJECTS makes
// ld.so print them and exit before main). Lets `run` probe libnrt or the step
// marker before the job's first call instead of after the first maps scan.
std::vector<std::string> resolve_needed_libs(const std::string& cmd) {
  std::string path = cmd;
  if (cmd.find('/') == std::string::npos) {
    const char* env = ::getenv("PATH");
    std::string p = env ? env : "/usr/bin:/bin";
    size_t pos = 0;
    path.clear();
    while (pos <= p.size()) {
      size_t c = p.find(':', pos);
      std::string dir = p.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
      std::string cand = (dir.empty() ? "." : dir) + "/" + cmd;
      if (::access(cand.c_str(), X_OK) == 0) {
        path = cand;
        break;
      }
      if (c == std::string::npos) break;
      pos = c + 1;
    }
    if (path.empty()) return {};
  }
  // Only dynamically linked ELF executables (with PT_INTERP): a script would
  // be run by its interpreter, and a static binary would ignore the variable
  // and really run.
  auto elf = read_small_file(path, 64 << 10);
  if (!elf || elf->size() < sizeof(Elf64_Ehdr) || elf->compare(0, 4, ELFMAG) != 0 ||
      (*elf)[EI_CLASS] != ELFCLASS64)
    return {};
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf->data(), sizeof(eh));
  bool has_interp = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    size_t off = eh.e_phoff + static_cast<size_t>(i) * eh.e_phentsize;
    if (eh.e_phentsize < sizeof(Elf64_Phdr) || off + sizeof(Elf64_Phdr) > elf->size()) break;
    Elf64_Phdr ph;
    std::memcpy(&ph, elf->data() + off, sizeof(ph));
    if (ph.p_type == PT_INTERP) has_interp = true;
  }
  if (!has_interp) return {};
  std::string q;
  for (char ch : path) {
    if (ch == '\'') q += "'\\''";
    else q += ch;
  }
  // The variable applies to this command only (not to a wrapper like timeout).
  FILE* f = ::popen(("LD_TRACE_LOADED_OBJECTS=1 '" + q + "' 2>/dev/null </dev/null").c_str(), "r");
  if (!f) return {};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ::pclose(f);
  // Lines look like "\tlibnrt.so.1 => /path/libnrt.so.1 (0x...)": reuse the maps parser on the paths.
  std::string paths;
  size_t pos = 0;
  while ((pos = out.find("=> ", pos)) != std::string::npos) {
    size_t e = out.find(' ', pos + 3);
    paths += out.substr(pos + 3, e == std::string::npos ? std::string::npos : e - pos - 3) + "\n";
    pos += 3;
  }
  return find_probe_libs(paths);
}

}  // namespace steptrace
