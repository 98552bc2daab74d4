// SPDX-License-Identifier: Apache-2.0
// JSON for the device signals (the report's "device_signals" and each
// step's "device").
#pragma once

#include <nlohmann/json.hpp>

#include "signals/step_signals.h"

namespace steptrace::signals {

nlohmann::json summary_to_json(const DeviceSignalsSummary& s);
nlohmann::json step_to_json(const StepDeviceSignals& d);

}  // namespace steptrace::signals
