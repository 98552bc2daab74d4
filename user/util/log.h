// SPDX-License-Identifier: Apache-2.0
// Minimal leveled logging to stderr; -v raises the level (and libbpf's).
#pragma once

#include <fmt/core.h>

#include <cstdio>

namespace steptrace::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

Level level();
void set_level(Level l);

template <typename... Args>
void emit(Level l, const char* tag, fmt::format_string<Args...> f, Args&&... args) {
  if (l > level()) return;
  fmt::print(stderr, "steptrace: {}{}\n", tag, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... a) { emit(Level::error, "error: ", f, std::forward<Args>(a)...); }
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) { emit(Level::warn, "warning: ", f, std::forward<Args>(a)...); }
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) { emit(Level::info, "", f, std::forward<Args>(a)...); }
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) { emit(Level::debug, "debug: ", f, std::forward<Args>(a)...); }

}  // namespace steptrace::log
