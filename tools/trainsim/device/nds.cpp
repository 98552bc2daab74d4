// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "device/nds.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "device/nds_layout.h"

namespace trainsim::device {

namespace fs = std::filesystem;

bool DatastoreWindow::open(const std::string &path, std::string *err)
{
	if (path.empty())
		return true;
	std::error_code ec;
	fs::create_directories(fs::path(path).parent_path(), ec);
	fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(nds::kSlabBytes * nds::kSlots)) != 0) {
		*err = "cannot create the datastore window " + path + ": " + strerror(errno);
		return false;
	}
	path_ = path;
	return true;
}

DatastoreWindow::~DatastoreWindow()
{
	if (fd_ >= 0) {
		::close(fd_);
		::unlink(path_.c_str());
	}
}

int64_t DatastoreWindow::acquire(pid_t caller, pid_t pid)
{
	if (fd_ < 0)
		return -ENOTTY;
	std::lock_guard lk(mu_);
	pid_t want = pid ? pid : caller;
	for (int i = 0; i < nds::kSlots; i++)
		if (owner_[i] == want)
			return static_cast<int64_t>(i) * static_cast<int64_t>(nds::kSlabBytes);
	if (pid != 0)
		return -ENOENT; // the monitoring path never creates a slot
	for (int i = 0; i < nds::kSlots; i++)
		if (owner_[i] == 0) {
			owner_[i] = caller;
			return static_cast<int64_t>(i) * static_cast<int64_t>(nds::kSlabBytes);
		}
	return -EBUSY;
}

void DatastoreWindow::release(pid_t caller)
{
	if (fd_ < 0)
		return;
	std::lock_guard lk(mu_);
	static const std::vector<char> zeros(nds::kSlabBytes, 0);
	for (int i = 0; i < nds::kSlots; i++)
		if (owner_[i] == caller) {
			// The driver folds the counters into sysfs, then zeroes the slab.
			(void)!pwrite(fd_, zeros.data(), zeros.size(), static_cast<off_t>(i * nds::kSlabBytes));
			owner_[i] = 0;
		}
}

void SysfsMetrics::init(const std::string &root, int index, int cores)
{
	if (root.empty())
		return;
	std::lock_guard lk(mu_);
	base_ = root + "/devices/virtual/neuron_device/neuron" + std::to_string(index);
	static const char *status[] = {"success", "failure", "timeout", "exec_bad_input", "hw_error",
				       "generic_error", "resource_error", "hw_collectives_error"};
	static const char *mem[] = {"model_code", "tensors", "constants", "collectives", "dma_rings"};
	for (int c = 0; c < cores; c++) {
		std::string nc = base_ + "/neuron_core" + std::to_string(c) + "/stats";
		for (const char *s : status)
			write_counter(nc + "/status/" + s, 0);
		for (const char *m : mem)
			write_counter(nc + "/memory_usage/device_mem/" + m, 0);
		write_counter(nc + "/other_info/inference_count", 0);
	}
	write_counter(base_ + "/stats/memory_usage/host_mem/tensors", 0);
	std::error_code ec;
	fs::create_directories(base_ + "/info/architecture", ec);
	if (FILE *f = fopen((base_ + "/core_count").c_str(), "w")) {
		fprintf(f, "%d\n", cores);
		fclose(f);
	}
}

void SysfsMetrics::write_counter(const std::string &dir, uint64_t v)
{
	// Every counter is a directory with `total` and `present` (and `peak`
	// for memory); writes go through a rename so readers never see half.
	std::error_code ec;
	fs::create_directories(dir, ec);
	for (const char *f : {"total", "present"}) {
		std::string p = dir + "/" + f, tmp = p + ".tmp";
		if (FILE *o = fopen(tmp.c_str(), "w")) {
			fprintf(o, "%llu\n", static_cast<unsigned long long>(v));
			fclose(o);
			rename(tmp.c_str(), p.c_str());
		}
	}
	values_[dir] = v;
}

void SysfsMetrics::on_execution(int nc, int32_t status)
{
	if (base_.empty())
		return;
	std::lock_guard lk(mu_);
	std::string st = base_ + "/neuron_core" + std::to_string(nc) + "/stats";
	const char *name = status == 0      ? "success"
			   : status == 5    ? "timeout"
			   : status == 1200 ? "hw_collectives_error"
					    : "failure";
	std::string dir = st + "/status/" + name;
	write_counter(dir, values_[dir] + 1);
	std::string ic = st + "/other_info/inference_count";
	write_counter(ic, values_[ic] + 1);
}

void SysfsMetrics::on_memory(int nc, bool host, int64_t delta)
{
	if (base_.empty())
		return;
	std::lock_guard lk(mu_);
	int64_t &v = host ? host_mem_ : dev_mem_;
	v = std::max<int64_t>(0, v + delta);
	std::string dir = host ? base_ + "/stats/memory_usage/host_mem/tensors"
			       : base_ + "/neuron_core" + std::to_string(nc) + "/stats/memory_usage/device_mem/tensors";
	write_counter(dir, static_cast<uint64_t>(v));
}

} // namespace trainsim::device
