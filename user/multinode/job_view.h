// SPDX-License-Identifier: Apache-2.0
// A merged job report (multinode/job_merge.h) as terminal text and as JSON
// (`report A.cap B.cap --json FILE`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "multinode/job_merge.h"

namespace steptrace {

std::string format_job_text(const JobReport& job);
nlohmann::json job_report_json(const JobReport& job);

}  // namespace steptrace
