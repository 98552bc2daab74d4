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
// How the hosts' clocks were aligned, in words: the whole job, one host.
std::string job_alignment_text(const JobReport& job);
std::string job_host_clock_text(const JobHost& host);

}  // namespace steptrace
