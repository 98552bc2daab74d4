// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// trainsim: simulated torch-neuronx training job with ground truth.
#include <cstdio>

#include "sim/cli.h"
#include "sim/launcher.h"

int main(int argc, char **argv)
{
	auto cli = trainsim::parse_cli(argc, argv);
	if (!cli.run) {
		if (!cli.error.empty())
			fprintf(stderr, "trainsim: %s\nRun with --help for more information.\n", cli.error.c_str());
		return cli.code;
	}
	return trainsim::run_launcher(cli.knobs);
}
