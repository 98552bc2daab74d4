// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// trainsim-device: the fake Neuron driver + hardware. Mounts a FUSE
// filesystem with one file per chip and serves the Neuron ioctls on them.
// trainsim starts it; it can also be run by hand for tests.
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "device/engine.h"
#include "device/fuse_server.h"

using namespace trainsim::device;

int main(int argc, char **argv)
{
	CLI::App app{"trainsim-device: FUSE-served fake Neuron devices"};
	std::string dir;
	DeviceConfig cfg;
	int ready_fd = -1;
	bool verbose = false;
	bool die_with_parent = false;
	uint64_t read_stall_ms = 0;
	app.add_option("--dir", dir, "mount point (an existing empty directory)")->required();
	app.add_option("--devices", cfg.devices, "number of chips (neuron0..N-1)")->check(CLI::Range(1, 64));
	app.add_option("--pcie-gbps", cfg.pcie_gbps, "host<->device copy bandwidth, GB/s")
		->check(CLI::PositiveNumber);
	app.add_option("--dma-chunk-ns", cfg.dma_chunk_ns, "fixed cost per 64 KiB DMA bounce chunk, ns");
	app.add_option("--link-gbps", cfg.link_gbps, "device collective link bandwidth, GB/s")
		->check(CLI::PositiveNumber);
	app.add_option("--collective-timeout-ms", cfg.collective_timeout_ms, "device collective timeout");
	app.add_option("--nds-dir", cfg.nds_dir,
		       "directory for the datastore window files (neuronN.nds); empty: no NDS, like an old driver");
	app.add_option("--sysfs-root", cfg.sysfs_root, "write the neuron sysfs metrics tree under this root");
	app.add_option("--ready-fd", ready_fd, "write 'ready\\n' to this fd once mounted");
	app.add_option("--read-stall-ms", read_stall_ms,
		       "a read(2) on a chip file opened read-only is answered after this long (0: chips take no reads)");
	app.add_flag("--die-with-parent", die_with_parent, "unmount and exit when the parent dies");
	app.add_flag("-v,--verbose", verbose, "print per-device ioctl counters at exit");
	CLI11_PARSE(app, argc, argv);

	if (die_with_parent) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			return 1;
	}
	Fabric fabric(cfg.devices);
	std::vector<std::unique_ptr<Device>> devices;
	for (int i = 0; i < cfg.devices; i++)
		devices.push_back(std::make_unique<Device>(i, cfg, fabric));

	VerbsAdapter verbs;
	int rc;
	{
		FuseServer server(devices, verbs);
		server.set_read_stall_ms(read_stall_ms);
		std::string err;
		if (!server.mount(dir, &err)) {
			fprintf(stderr, "trainsim-device: %s\n", err.c_str());
			return 1;
		}
		if (ready_fd >= 0) {
			(void)!write(ready_fd, "ready\n", 6);
			close(ready_fd);
		}
		rc = server.run();
	} // unmounts here, before the devices go away
	if (verbose)
		fprintf(stderr, "trainsim-device: uverbs0 calls=%lu registered_bytes=%lu\n",
			static_cast<unsigned long>(verbs.calls()), static_cast<unsigned long>(verbs.registered_bytes()));
	fabric.shutdown(); // an engine waiting at the barrier for a hung rank
	for (auto &d : devices) {
		d->stop();
		if (verbose) {
			const auto &c = d->counters();
			fprintf(stderr,
				"trainsim-device: neuron%d ioctls=%lu copies=%lu copy_bytes=%lu kicks=%lu acks=%lu "
				"executions=%lu unknown=%lu\n",
				d->index(), c.calls.load(), c.copies.load(), c.copy_bytes.load(), c.kicks.load(),
				c.acks.load(), c.executions.load(), c.unknown.load());
		}
	}
	return rc < 0 ? 1 : 0;
}
