// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// cli.h - trainsim's command line: a named scenario, then any knob given
// explicitly on the command line overrides that scenario's value.
#pragma once

#include <string>
#include <vector>

#include "sim/knobs.h"

namespace trainsim {

struct CliOutcome {
	bool run = false;   // false: exit with `code` (help, list, or error)
	int code = 0;
	std::string error;  // set when code != 0
	Knobs knobs;
};

CliOutcome parse_cli(const std::vector<std::string> &args);
CliOutcome parse_cli(int argc, char **argv);

} // namespace trainsim
