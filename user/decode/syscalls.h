// SPDX-License-Identifier: Apache-2.0
// System calls the analysis recognises in records (the blocked-in syscall of
// a state segment). The numbers' one home is bpf/arch_x86.h, shared with the
// BPF programs; steptrace is x86_64 only.
#pragma once

#include <cstdint>

#include "arch_x86.h"

namespace steptrace {

// A wait for file descriptors to become ready: poll, select, epoll_wait,
// pselect6, ppoll, epoll_pwait, epoll_pwait2.
constexpr bool is_readiness_wait(int32_t nr) {
  return nr == ST_NR_POLL || nr == ST_NR_SELECT || nr == ST_NR_EPOLL_WAIT || nr == ST_NR_PSELECT6 ||
         nr == ST_NR_PPOLL || nr == ST_NR_EPOLL_PWAIT || nr == ST_NR_EPOLL_PWAIT2;
}

}  // namespace steptrace
