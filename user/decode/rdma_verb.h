// SPDX-License-Identifier: Apache-2.0
// Names for uverbs calls (the EFA control path): which verb a record is, from
// its ioctl object/method or its legacy command number, and what kind of
// setup it belongs to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace steptrace {

enum class VerbGroup : uint8_t { memory_registration, queues, context, query, other };
std::string_view verb_group_name(VerbGroup g);

struct VerbInfo {
  std::string name;  // e.g. "reg_mr", "create_qp"
  VerbGroup group = VerbGroup::other;
};

// object/method from the ioctl header (0/0 for the write path), write_cmd the
// legacy command number or ST_RDMA_NO_CMD.
VerbInfo rdma_verb_info(uint32_t object, uint32_t method, uint32_t write_cmd);

}  // namespace steptrace
