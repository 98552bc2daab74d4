// SPDX-License-Identifier: Apache-2.0
// A decoded record: the ABI struct itself (POD, validated), one alternative per kind.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>

#include "steptrace_abi.h"

namespace steptrace {

using Event = std::variant<st_sched_switch, st_sched_wakeup, st_task_new, st_task_comm /* exec */,
                           st_task_exit, st_block_rq, st_net_xfer, st_tcp_retransmit, st_tcp_state,
                           st_accel_ioctl, st_uprobe, st_accel_tp, st_rdma_verb, st_host_steal>;

inline const st_event_header& header_of(const Event& e) {
  return std::visit([](const auto& v) -> const st_event_header& { return v.hdr; }, e);
}

std::string_view kind_name(uint32_t kind);

}  // namespace steptrace
