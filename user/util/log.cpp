// SPDX-License-Identifier: Apache-2.0
#include "util/log.h"

#include <atomic>

namespace steptrace::log {
namespace {
std::atomic<Level> g_level{Level::warn};
}
Level level() { return g_level.load(std::memory_order_relaxed); }
void set_level(Level l) { g_level.store(l, std::memory_order_relaxed); }
}  // namespace steptrace::log
