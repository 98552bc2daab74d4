// SPDX-License-Identifier: Apache-2.0
// The version's one home is project(VERSION) in the top-level CMakeLists.txt,
// passed down as STEPTRACE_VERSION; code reads it here.
#pragma once

#ifndef STEPTRACE_VERSION
#define STEPTRACE_VERSION "0.0.0-unknown"  // compiled outside CMake (the libFuzzer scripts)
#endif

namespace steptrace {
inline constexpr const char kVersion[] = STEPTRACE_VERSION;
}  // namespace steptrace
