// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "device/engine.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "device/nds_layout.h"
#include "device/user_mem.h"
#include "sim/pacing.h"

namespace trainsim::device {

namespace {

constexpr uint64_t kMaxChunkBytes = 2ull << 30;  // refuse absurd allocations
constexpr uint64_t kMaxProgramBytes = 64ull << 20;
constexpr uint32_t kMaxDescs = 4096;

} // namespace

void sleep_until(uint64_t t_ns)
{
	timespec ts{static_cast<time_t>(t_ns / 1000000000ull), static_cast<long>(t_ns % 1000000000ull)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
	}
}

uint64_t monotonic_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Device::Device(int index, const DeviceConfig &cfg, Fabric &fabric)
    : index_(index), cfg_(cfg), fabric_(fabric)
{
	std::string err;
	if (!cfg.nds_dir.empty() &&
	    !nds_.open(cfg.nds_dir + "/neuron" + std::to_string(index) + TRAINSIM_NDS_WINDOW_SUFFIX, &err))
		fprintf(stderr, "trainsim-device: %s (NDS off)\n", err.c_str());
	sysfs_.init(cfg.sysfs_root, index, cfg.cores);
	exec_thread_ = std::thread([this] { exec_loop(); });
}

Device::~Device()
{
	stop();
}

void Device::stop()
{
	{
		std::lock_guard lk(mu_);
		stopping_ = true;
	}
	cv_.notify_all();
	if (exec_thread_.joinable())
		exec_thread_.join();
}

int Device::read_arg(pid_t tid, uint64_t arg, const void *in, size_t in_size, void *out, size_t size)
{
	if (in && in_size >= size) {
		memcpy(out, in, size);
		return 0;
	}
	return copy_from_user(tid, out, arg, size);
}

void Device::dma_wait(uint64_t start_ns, uint64_t bytes)
{
	// The real driver spins in the kernel until the DMA completes; sleeping
	// here keeps the caller blocked for the same time without burning the
	// simulator's CPUs.
	sleep_until(start_ns + copy_time_ns(bytes, cfg_.pcie_gbps, cfg_.dma_chunk_ns));
}

int Device::ioctl(pid_t tid, uint32_t cmd, uint64_t arg, const void *in, size_t in_size)
{
	counters_.calls++;
	switch (cmd) {
	case NEURON_CMD_MEM_ALLOC_V2MT64:
		return do_mem_alloc(tid, arg);
	case NEURON_CMD_MEM_FREE:
		return do_mem_free(tid, arg, in, in_size);
	case NEURON_CMD_MEM_BUF_COPY64:
		return do_buf_copy(tid, arg, in, in_size, true);
	case NEURON_CMD_MEM_BUF_ZEROCOPY64:
		return do_buf_copy(tid, arg, in, in_size, false);
	case NEURON_CMD_MEM_COPY64:
		return do_mem_copy(tid, arg);
	case NEURON_CMD_PROGRAM_ENGINE_NC64:
		return do_program(tid, arg, in, in_size);
	case NEURON_CMD_DMA_COPY_DESCRIPTORS64:
		return do_copy_descriptors(tid, arg);
	case NEURON_CMD_DMA_QUEUE_COPY_START:
		return do_kick(tid, arg);
	case NEURON_CMD_DMA_ACK_COMPLETED:
		return do_ack(tid, arg);
	case NEURON_CMD_SEMAPHORE_INCREMENT:
	case NEURON_CMD_SEMAPHORE_DECREMENT:
	case NEURON_CMD_SEMAPHORE_WRITE:
	case NEURON_CMD_SEMAPHORE_READ:
		return do_semaphore(tid, cmd, arg, in, in_size);
	case TRAINSIM_CMD_NOTIFICATIONS_INIT_V2:
		return do_nq_init(tid, arg);
	case NEURON_CMD_ACQUIRE_NEURON_DS:
		return do_acquire_ds(tid, arg);
	case NEURON_CMD_RELEASE_NEURON_DS:
		return do_release_ds(tid, arg);
	// Lock, reset and queue-setup commands: the sim has one process per
	// device and nothing to reset, so they succeed at once (all "imm" or
	// short in the real driver when uncontended).
	case NEURON_CMD_CRWL_READER_ENTER:
	case NEURON_CMD_CRWL_READER_EXIT:
	case NEURON_CMD_CRWL_WRITER_ENTER:
	case NEURON_CMD_CRWL_WRITER_DOWNGRADE:
	case NEURON_CMD_CRWL_NC_RANGE_MARK:
	case NEURON_CMD_CRWL_NC_RANGE_UNMARK:
	case NEURON_CMD_CINIT_SET_STATE:
	case NEURON_CMD_NC_RESET:
	case NEURON_CMD_NC_RESET_READY:
	case NEURON_CMD_DMA_QUEUE_INIT:
	case NEURON_CMD_DMA_QUEUE_RELEASE:
	case NEURON_CMD_DMA_ENG_SET_STATE:
	case NEURON_CMD_EVENT_SET:
	case NEURON_CMD_EVENT_GET:
		return 0;
	default:
		counters_.unknown++;
		return -ENOTTY;
	}
}

int Device::do_mem_alloc(pid_t tid, uint64_t arg)
{
	neuron_arg_mem_alloc_v2mt64 a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	if (a.size == 0 || a.size > kMaxChunkBytes)
		return -ENOMEM;
	Chunk c;
	// new char[] leaves pages untouched until a copy writes them.
	c.data.reset(new (std::nothrow) char[a.size]);
	if (!c.data)
		return -ENOMEM;
	c.size = a.size;
	c.host = a.host_memory != 0;
	uint64_t handle;
	{
		std::lock_guard lk(mu_);
		handle = next_handle_++;
		chunks_.emplace(handle, std::move(c));
	}
	sysfs_.on_memory(static_cast<int>(a.nc_id), a.host_memory != 0, static_cast<int64_t>(a.size));
	if (int err = copy_to_user(tid, a.mem_handle_ptr, &handle, sizeof(handle))) {
		std::lock_guard lk(mu_);
		chunks_.erase(handle);
		return err;
	}
	return 0;
}

int Device::do_mem_free(pid_t tid, uint64_t arg, const void *in, size_t in_size)
{
	neuron_arg_mem_free a{};
	if (int err = read_arg(tid, arg, in, in_size, &a, sizeof(a)))
		return err;
	std::lock_guard lk(mu_);
	auto it = chunks_.find(a.mem_handle);
	if (it == chunks_.end())
		return -EINVAL;
	sysfs_.on_memory(0, it->second.host, -static_cast<int64_t>(it->second.size));
	chunks_.erase(it);
	return 0;
}

int Device::do_buf_copy(pid_t tid, uint64_t arg, const void *in, size_t in_size, bool bounce)
{
	uint64_t t0 = monotonic_ns();
	neuron_arg_mem_buf_copy64 a{};
	if (int err = read_arg(tid, arg, in, in_size, &a, sizeof(a)))
		return err;
	char *mem;
	bool host;
	{
		std::lock_guard lk(mu_);
		auto it = chunks_.find(a.mem_handle);
		if (it == chunks_.end())
			return -EINVAL;
		if (a.offset > it->second.size || a.size > it->second.size - a.offset)
			return -EINVAL;
		mem = it->second.data.get() + a.offset;
		host = it->second.host;
	}
	// Real bytes move, so a bad user buffer fails like it would in the driver.
	int err = a.copy_to_mem_handle ? copy_from_user(tid, mem, a.buffer, a.size)
				       : copy_to_user(tid, a.buffer, mem, a.size);
	if (err)
		return err;
	counters_.copies++;
	counters_.copy_bytes += a.size;
	if (!host) {
		if (bounce)
			dma_wait(t0, a.size);
		else // zero-copy: pinned pages, no bounce chunks, one setup cost
			sleep_until(t0 + cfg_.dma_chunk_ns + transfer_time_ns(a.size, cfg_.pcie_gbps * 1e9));
	}
	return 0;
}

int Device::do_mem_copy(pid_t tid, uint64_t arg)
{
	uint64_t t0 = monotonic_ns();
	neuron_arg_mem_copy64 a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	bool any_device;
	{
		std::lock_guard lk(mu_);
		auto s = chunks_.find(a.src_mem_handle);
		auto d = chunks_.find(a.dst_mem_handle);
		if (s == chunks_.end() || d == chunks_.end())
			return -EINVAL;
		if (a.src_offset > s->second.size || a.size > s->second.size - a.src_offset ||
		    a.dst_offset > d->second.size || a.size > d->second.size - a.dst_offset)
			return -EINVAL;
		memmove(d->second.data.get() + a.dst_offset, s->second.data.get() + a.src_offset, a.size);
		any_device = !s->second.host || !d->second.host;
	}
	counters_.copies++;
	counters_.copy_bytes += a.size;
	if (any_device)
		dma_wait(t0, a.size);
	return 0;
}

int Device::do_program(pid_t tid, uint64_t arg, const void *in, size_t in_size)
{
	uint64_t t0 = monotonic_ns();
	neuron_arg_program_engine_nc64 a{};
	if (int err = read_arg(tid, arg, in, in_size, &a, sizeof(a)))
		return err;
	if (a.size == 0 || a.size > kMaxProgramBytes)
		return -EINVAL;
	std::vector<char> code(a.size);
	if (int err = copy_from_user(tid, code.data(), a.buffer, a.size))
		return err;
	if (a.size >= sizeof(trainsim_neff)) {
		trainsim_neff neff;
		memcpy(&neff, code.data(), sizeof(neff));
		if (neff.magic == TRAINSIM_NEFF_MAGIC) {
			std::lock_guard lk(mu_);
			Program &p = programs_[{tgid_of(tid), a.nc_id}];
			p.neff = neff;
			p.valid = true;
		}
	}
	dma_wait(t0, a.size);
	return 0;
}

int Device::do_copy_descriptors(pid_t tid, uint64_t arg)
{
	uint64_t t0 = monotonic_ns();
	neuron_arg_dma_copy_descriptors64 a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	if (a.num_descs == 0 || a.num_descs > kMaxDescs)
		return -EINVAL;
	std::vector<trainsim_desc> descs(a.num_descs);
	size_t bytes = a.num_descs * sizeof(trainsim_desc);
	if (int err = copy_from_user(tid, descs.data(), a.buffer, bytes))
		return err;
	pid_t tgid = tgid_of(tid);
	bool device_ring;
	{
		std::lock_guard lk(mu_);
		auto it = chunks_.find(a.mem_handle);
		if (it == chunks_.end())
			return -EINVAL;
		if (a.offset > it->second.size || bytes > it->second.size - a.offset)
			return -EINVAL;
		memcpy(it->second.data.get() + a.offset, descs.data(), bytes);
		device_ring = !it->second.host;
		int64_t compute_ns = -1; // a COMPUTE descriptor describes the next EXEC
		for (const auto &d : descs) {
			if (d.op == TRAINSIM_DESC_OP_COMPUTE) {
				compute_ns = static_cast<int64_t>(std::min<uint64_t>(d.seq, INT64_MAX));
			} else if (d.op == TRAINSIM_DESC_OP_EXEC) {
				pending_[tgid].push_back(ExecJob{tgid, d.nc_id, d.seq, 0, compute_ns});
				compute_ns = -1;
			}
		}
	}
	// A ring in device memory is written by DMA (spin in the real driver).
	if (device_ring)
		dma_wait(t0, bytes);
	return 0;
}

int Device::do_kick(pid_t tid, uint64_t arg)
{
	neuron_arg_dma_queue_copy_start a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	counters_.kicks++;
	if (a.eng_id != TRAINSIM_EXEC_ENGINE)
		return 0; // input queues: the doorbell only moves a tail pointer
	pid_t tgid = tgid_of(tid);
	uint64_t now = monotonic_ns();
	{
		std::lock_guard lk(mu_);
		auto it = pending_.find(tgid);
		if (it == pending_.end() || it->second.empty())
			return 0;
		for (auto &job : it->second) {
			job.t_kick_ns = now;
			queue_.push_back(job);
		}
		it->second.clear();
	}
	cv_.notify_all();
	return 0;
}

int Device::do_ack(pid_t tid, uint64_t arg)
{
	neuron_arg_dma_ack_completed a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	counters_.acks++;
	return 0;
}

int Device::do_semaphore(pid_t tid, uint32_t cmd, uint64_t arg, const void *in, size_t in_size)
{
	neuron_arg_semaphore a{};
	if (int err = read_arg(tid, arg, in, in_size, &a, sizeof(a)))
		return err;
	if (a.index >= semaphores_.size())
		return -EINVAL;
	std::lock_guard lk(mu_);
	uint32_t &s = semaphores_[a.index];
	switch (cmd) {
	case NEURON_CMD_SEMAPHORE_INCREMENT:
		s += a.value;
		return 0;
	case NEURON_CMD_SEMAPHORE_DECREMENT:
		s -= a.value;
		return 0;
	case NEURON_CMD_SEMAPHORE_WRITE:
		s = a.value;
		return 0;
	default: // READ: value goes back at its offset in the caller's struct
		return copy_to_user(tid, arg + offsetof(neuron_arg_semaphore, value), &s, sizeof(s));
	}
}

int Device::do_nq_init(pid_t tid, uint64_t arg)
{
	trainsim_nq_init_v2 a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	uint32_t entries = a.size / sizeof(trainsim_nq_entry);
	if (entries == 0 || a.mmap_offset == 0)
		return -EINVAL;
	uint64_t handle;
	{
		std::lock_guard lk(mu_);
		pid_t tgid = tgid_of(tid);
		if (a.nq_dev_type == TRAINSIM_NQ_DEV_TOPSP)
			proxies_[tgid] = a.mmap_offset; // the network proxy's mailbox
		else
			nqs_[tgid] = NotifyQueue{tgid, a.mmap_offset, entries};
		handle = next_handle_++;
	}
	return copy_to_user(tid, arg + offsetof(trainsim_nq_init_v2, mem_handle), &handle, sizeof(handle));
}

int Device::do_acquire_ds(pid_t tid, uint64_t arg)
{
	neuron_arg_neuron_ds_info a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	// Driver semantics (device-counters.md 1.1): pid 0 finds or creates the
	// caller's slab, pid != 0 only finds an existing one (ENOENT). The
	// offset is into the window file the `<device>.nds` link names.
	int64_t off = nds_.acquire(tgid_of(tid), a.pid);
	if (off < 0)
		return static_cast<int>(off);
	a.mmap_offset = static_cast<uint64_t>(off);
	a.size = static_cast<uint32_t>(nds::kSlabBytes);
	return copy_to_user(tid, arg, &a, sizeof(a));
}

int Device::do_release_ds(pid_t tid, uint64_t arg)
{
	neuron_arg_neuron_ds_info a{};
	if (int err = copy_from_user(tid, &a, arg, sizeof(a)))
		return err;
	nds_.release(tgid_of(tid)); // a foreign release is a silent no-op
	return 0;
}

} // namespace trainsim::device
