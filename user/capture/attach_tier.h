// SPDX-License-Identifier: Apache-2.0
// Which attach point each collector used: chosen by the loader
// (loader/tiers.h), carried in a capture's metadata and in every report.
#pragma once

#include <string>

namespace steptrace {

struct AttachTier {
  std::string collector;
  std::string tier;  // e.g. "tp_btf sched_switch", "disabled: ..."
};

}  // namespace steptrace
