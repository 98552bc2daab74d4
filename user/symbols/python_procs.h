// SPDX-License-Identifier: Apache-2.0
// CPython interpreters for the stack sampler: is a process a CPython 3.11 or
// 3.12, where is its _PyRuntime, and the st_py_proc layout the BPF sampler
// (bpf/sample.bpf.c) walks its frames with; then code-object address ->
// "qualname (file:line)" through /proc/PID/mem.
// Scope: CPython 3.11 and 3.12 (release builds) on x86_64 with glibc (the
// pthread TSS slot is glibc's: 0x318 + 16 * key, keys < 32). Other versions,
// musl and other architectures are refused or unsupported.
// docs: shared/domain/stacks.md section 3.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "steptrace_abi.h"
#include "util/result.h"
#include "util/sys_root.h"

namespace steptrace::symbols {

struct PythonProcess {
  int major = 3, minor = 0;    // from Py_Version, read from the process's memory
  uint64_t runtime_addr = 0;   // _PyRuntime in the process
  uint64_t code_type_addr = 0; // PyCode_Type in the process (the ob_type of every code object)
  // Ready for the st_py_procs map: tss_key_addr = runtime_addr + autoTSSkey
  // offset + 4 (Py_tss_t._key), glibc's tss_base 0x318 / stride 16, the
  // frame offsets of the minor version.
  st_py_proc layout{};
  std::string binary;  // the ELF that holds _PyRuntime (python3.11 or libpython3.X.so), path as mapped
};

// Is pid a CPython 3.11 or 3.12 interpreter? Finds the mapping of the ELF
// that exports _PyRuntime (the main executable, or libpython3.X.so for
// --enable-shared builds), computes its load bias from /proc/PID/maps
// (ET_EXEC: 0; ET_DYN: from the PT_LOAD segment holding the mapping's file
// offset), and reads Py_Version from the process's memory. Files are read
// through /proc/PID/map_files, else /proc/PID/root. An error with the reason
// otherwise: "not a Python process", "Python 3.10 is not supported (3.11,
// 3.12)", an unreadable process.
Result<PythonProcess> find_python(const SysRoot& root, uint32_t pid);

// "qualname (file:firstlineno)" of the code object at `code_addr` in pid
// (the file as the interpreter has it, e.g. "<string>" or a full path),
// read through /proc/PID/mem; nullopt when unreadable or not a code object
// (its ob_type is not py.code_type_addr). Strings are cut at 512 bytes.
std::optional<std::string> python_code_name(const SysRoot& root, uint32_t pid, uint64_t code_addr,
                                            const PythonProcess& py);

}  // namespace steptrace::symbols
