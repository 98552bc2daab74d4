// SPDX-License-Identifier: Apache-2.0
// Names and attribution classes of Neuron ioctl commands.
#pragma once

#include <cstdint>
#include <string>

#include "neuron_uapi.h"

namespace steptrace {

std::string neuron_cmd_name(uint32_t cmd);
neuron_ioctl_class neuron_cmd_class(uint32_t cmd);

}  // namespace steptrace
