// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// nrt.cpp - the fake Neuron runtime. Every device interaction is a real
// ioctl(2) on the FUSE-served device file with the real command values and
// argument layouts (bpf/neuron_uapi.h), in the order neuron.md section 3
// infers for libnrt. Completion is detected the way the real runtime does:
// busy-polling a notification queue in host memory, yielding between polls.
#include "nrt.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "nrt/nrt_signals.h"
#include "nrt/nrt_verbs.h"
#include "sim/clock.h"
#include "sim_protocol.h"

struct nrt_model {
	int32_t nc;
	trainsim_neff neff;
	uint64_t program_handle;
	uint64_t ring_handle;
	int64_t exec_compute_ns = -1; // >= 0: sent with every execution (COMPUTE descriptor)
};

struct nrt_tensor {
	uint64_t handle;
	size_t size;
	bool host;
	std::string name;
};

struct nrt_tensor_set {
	std::vector<std::pair<std::string, nrt_tensor_t *>> tensors;
};

namespace {

struct Runtime {
	std::mutex mu;
	int fd = -1;
	std::string path;
	trainsim_nq_entry *nq = nullptr; // TRAINSIM_NQ_ENTRIES, written by the device
	bool nq_registered = false;
	uint64_t seq = 0;
	uint64_t exec_timeout_ns = 30ull * 1000000000ull;
	trainsim_exec_info last{};
	bool have_last = false;
};

Runtime &rt()
{
	static Runtime r;
	return r;
}

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ioctl wrapper: prints the failing command once so a broken setup is
// diagnosable, returns NRT_SUCCESS or NRT_FAILURE.
NRT_STATUS dev_ioctl(unsigned long cmd, void *arg, const char *what)
{
	int fd = rt().fd;
	if (fd < 0)
		return NRT_UNINITIALIZED;
	int rc;
	do {
		rc = ioctl(fd, cmd, arg);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		fprintf(stderr, "nrt: %s (cmd 0x%lx) failed: %s\n", what, cmd, strerror(errno));
		return NRT_FAILURE;
	}
	return NRT_SUCCESS;
}

NRT_STATUS mem_alloc(uint64_t size, bool host, int32_t nc, uint32_t mem_type, uint64_t *handle)
{
	neuron_arg_mem_alloc_v2mt64 a{};
	a.size = size;
	a.align = 4096;
	a.host_memory = host ? 1 : 0;
	a.nc_id = static_cast<uint32_t>(nc);
	a.mem_type = mem_type;
	a.mem_handle_ptr = reinterpret_cast<uint64_t>(handle);
	return dev_ioctl(NEURON_CMD_MEM_ALLOC_V2MT64, &a, "MEM_ALLOC_V2MT64");
}

void mem_free(uint64_t handle)
{
	neuron_arg_mem_free a{handle};
	dev_ioctl(NEURON_CMD_MEM_FREE, &a, "MEM_FREE");
}

NRT_STATUS buf_copy(uint64_t handle, void *buf, size_t offset, size_t size, bool to_device)
{
	neuron_arg_mem_buf_copy64 a{};
	a.mem_handle = handle;
	a.buffer = reinterpret_cast<uint64_t>(buf);
	a.size = size;
	a.offset = offset;
	a.copy_to_mem_handle = to_device ? 1 : 0;
	return dev_ioctl(NEURON_CMD_MEM_BUF_COPY64, &a, "MEM_BUF_COPY64");
}

// CRWL-style argument (36 bytes in the driver); the sim only needs the NC.
struct crwl_arg {
	uint32_t nc_id;
	uint32_t words[8];
};

} // namespace

extern "C" {

NRT_STATUS nrt_init(nrt_framework_type_t, const char *, const char *)
{
	Runtime &r = rt();
	std::lock_guard lk(r.mu);
	if (r.fd >= 0)
		return NRT_SUCCESS;
	const char *path = getenv("TRAINSIM_NEURON_DEVICE");
	if (!path || !*path) {
		fprintf(stderr, "nrt: TRAINSIM_NEURON_DEVICE is not set (path of the fake /dev/neuronN)\n");
		return NRT_INVALID;
	}
	if (const char *t = getenv("NEURON_RT_EXEC_TIMEOUT"))
		r.exec_timeout_ns = strtoull(t, nullptr, 10) * 1000000000ull;
	// A plain O_RDWR open "attaches" the process, like the real runtime.
	r.fd = open(path, O_RDWR | O_CLOEXEC);
	if (r.fd < 0) {
		fprintf(stderr, "nrt: cannot open %s: %s\n", path, strerror(errno));
		return NRT_FAILURE;
	}
	r.path = path;
	void *nq = aligned_alloc(4096, TRAINSIM_NQ_ENTRIES * sizeof(trainsim_nq_entry));
	if (!nq)
		return NRT_RESOURCE;
	memset(nq, 0, TRAINSIM_NQ_ENTRIES * sizeof(trainsim_nq_entry));
	r.nq = static_cast<trainsim_nq_entry *>(nq);

	// nrt_init sequence from neuron.md section 3: claim the NC range, reset
	// the NCs and wait, then get the per-process datastore.
	crwl_arg range{};
	uint64_t nc_map = 1;
	neuron_arg_neuron_ds_info ds{};
	if (dev_ioctl(NEURON_CMD_CRWL_NC_RANGE_MARK, &range, "CRWL_NC_RANGE_MARK") ||
	    dev_ioctl(NEURON_CMD_NC_RESET, &nc_map, "NC_RESET") ||
	    dev_ioctl(NEURON_CMD_NC_RESET_READY, &nc_map, "NC_RESET_READY")) {
		close(r.fd);
		r.fd = -1;
		return NRT_FAILURE;
	}
	// The datastore is optional: an old driver has none (the runtime then
	// only loses its metrics).
	if (ioctl(r.fd, NEURON_CMD_ACQUIRE_NEURON_DS, &ds) == 0)
		trainsim::nrt_signals::nds_attach(r.path, ds.mmap_offset, ds.size);
	trainsim::nrt_signals::efa_open(r.path);
	return NRT_SUCCESS;
}

void nrt_close(void)
{
	Runtime &r = rt();
	std::lock_guard lk(r.mu);
	if (r.fd < 0)
		return;
	neuron_arg_neuron_ds_info ds{};
	crwl_arg range{};
	trainsim::nrt_signals::proxy_stop();
	trainsim::nrt_verbs::teardown();
	trainsim::nrt_signals::nds_detach();
	ioctl(r.fd, NEURON_CMD_RELEASE_NEURON_DS, &ds);
	dev_ioctl(NEURON_CMD_CRWL_NC_RANGE_UNMARK, &range, "CRWL_NC_RANGE_UNMARK");
	close(r.fd);
	r.fd = -1;
	// The ring is not freed (a late device write must not land in reused
	// memory); a later nrt_init allocates and registers a fresh one.
	r.nq = nullptr;
	r.nq_registered = false;
}

NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t start_nc, int32_t, nrt_model_t **model)
{
	if (!neff_bytes || !model || size < sizeof(trainsim_neff))
		return NRT_INVALID;
	trainsim_neff neff;
	memcpy(&neff, neff_bytes, sizeof(neff));
	if (neff.magic != TRAINSIM_NEFF_MAGIC || neff.input_queues == 0)
		return NRT_INVALID;
	Runtime &r = rt();
	std::lock_guard lk(r.mu);
	if (r.fd < 0)
		return NRT_UNINITIALIZED;
	auto *m = new (std::nothrow) nrt_model{start_nc, neff, 0, 0};
	if (!m)
		return NRT_RESOURCE;
	crwl_arg lock{};
	lock.nc_id = static_cast<uint32_t>(start_nc);
	// Model load holds the writer lock; program, ring and NQ set up inside.
	NRT_STATUS st = dev_ioctl(NEURON_CMD_CRWL_WRITER_ENTER, &lock, "CRWL_WRITER_ENTER");
	if (!st)
		st = mem_alloc(size, false, start_nc, 1, &m->program_handle);
	if (!st) {
		neuron_arg_program_engine_nc64 p{};
		p.nc_id = static_cast<uint32_t>(start_nc);
		p.dst = m->program_handle;
		p.buffer = reinterpret_cast<uint64_t>(neff_bytes);
		p.size = size;
		st = dev_ioctl(NEURON_CMD_PROGRAM_ENGINE_NC64, &p, "PROGRAM_ENGINE_NC64");
	}
	if (!st)
		st = mem_alloc(TRAINSIM_NQ_ENTRIES * sizeof(trainsim_desc), false, start_nc, 2, &m->ring_handle);
	if (!st && !r.nq_registered) {
		trainsim_nq_init_v2 nq{};
		nq.nq_dev_id = static_cast<uint32_t>(start_nc);
		nq.size = TRAINSIM_NQ_ENTRIES * sizeof(trainsim_nq_entry);
		nq.on_host_memory = 1;
		nq.mmap_offset = reinterpret_cast<uint64_t>(r.nq);
		st = dev_ioctl(TRAINSIM_CMD_NOTIFICATIONS_INIT_V2, &nq, "NOTIFICATIONS_INIT_V2");
		r.nq_registered = !st;
	}
	// A program with a device collective gets the NC's network proxy thread.
	if (!st && neff.cc_bytes > 0 && neff.cc_ranks > 1 &&
	    !trainsim::nrt_signals::proxy_start(start_nc, static_cast<int>(neff.cc_ranks), [](uint64_t addr, uint32_t size,
											int nc) {
		    trainsim_nq_init_v2 q{};
		    q.nq_dev_id = static_cast<uint32_t>(nc);
		    q.nq_dev_type = TRAINSIM_NQ_DEV_TOPSP;
		    q.size = size;
		    q.on_host_memory = 1;
		    q.mmap_offset = addr;
		    return dev_ioctl(TRAINSIM_CMD_NOTIFICATIONS_INIT_V2, &q, "NOTIFICATIONS_INIT_V2(TOPSP)") == NRT_SUCCESS;
	    }))
		st = NRT_FAILURE;
	if (!st) {
		neuron_arg_semaphore sem{static_cast<uint32_t>(start_nc), 0, 0};
		st = dev_ioctl(NEURON_CMD_SEMAPHORE_WRITE, &sem, "SEMAPHORE_WRITE");
	}
	dev_ioctl(NEURON_CMD_CRWL_WRITER_DOWNGRADE, &lock, "CRWL_WRITER_DOWNGRADE");
	if (st) {
		delete m;
		return st;
	}
	// nrt_load_collectives: the EFA endpoint and the collective buffer's
	// registration (only with a fake adapter, $TRAINSIM_UVERBS_DEVICE).
	trainsim::nrt_verbs::setup(neff.cc_bytes ? neff.cc_bytes : 16ull << 20);
	*model = m;
	return NRT_SUCCESS;
}

NRT_STATUS nrt_unload(nrt_model_t *model)
{
	if (!model)
		return NRT_INVALID_HANDLE;
	{
		std::lock_guard lk(rt().mu);
		if (rt().fd >= 0) {
			mem_free(model->program_handle);
			mem_free(model->ring_handle);
		}
	}
	delete model;
	return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int logical_nc_id, size_t size,
			       const char *name, nrt_tensor_t **tensor)
{
	if (!tensor || size == 0)
		return NRT_INVALID;
	bool host = placement == NRT_TENSOR_PLACEMENT_HOST;
	uint64_t handle = 0;
	std::lock_guard lk(rt().mu);
	if (NRT_STATUS st = mem_alloc(size, host, logical_nc_id, 3, &handle))
		return st;
	*tensor = new nrt_tensor{handle, size, host, name ? name : ""};
	return NRT_SUCCESS;
}

void nrt_tensor_free(nrt_tensor_t **tensor)
{
	if (!tensor || !*tensor)
		return;
	{
		std::lock_guard lk(rt().mu);
		if (rt().fd >= 0)
			mem_free((*tensor)->handle);
	}
	delete *tensor;
	*tensor = nullptr;
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t *tensor, const void *buf, size_t offset, size_t size)
{
	if (!tensor || !buf || offset > tensor->size || size > tensor->size - offset)
		return NRT_INVALID;
	return buf_copy(tensor->handle, const_cast<void *>(buf), offset, size, true);
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t *tensor, void *buf, size_t offset, size_t size)
{
	if (!tensor || !buf || offset > tensor->size || size > tensor->size - offset)
		return NRT_INVALID;
	return buf_copy(tensor->handle, buf, offset, size, false);
}

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t **result)
{
	if (!result)
		return NRT_INVALID;
	*result = new nrt_tensor_set{};
	return NRT_SUCCESS;
}

void nrt_destroy_tensor_set(nrt_tensor_set_t **tensor_set)
{
	if (tensor_set) {
		delete *tensor_set;
		*tensor_set = nullptr;
	}
}

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name,
					nrt_tensor_t *tensor)
{
	if (!tensor_set || !tensor)
		return NRT_INVALID;
	tensor_set->tensors.emplace_back(tensor_name ? tensor_name : "", tensor);
	return NRT_SUCCESS;
}

NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *, nrt_tensor_set_t *)
{
	if (!model)
		return NRT_INVALID_HANDLE;
	Runtime &r = rt();
	if (r.fd < 0 || !r.nq_registered)
		return NRT_UNINITIALIZED;
	trainsim_exec_info info{};
	thread_local trainsim::RunDelay run_delay;
	info.have_run_delay = run_delay.ok();
	info.rd_enter_ns = static_cast<uint64_t>(run_delay.read());
	info.t_enter_ns = now_ns();
	uint64_t seq = ++r.seq;
	info.seq = seq;

	// 1. Write the execution descriptor into the model's ring, after the
	// execution's compute time when that is set per execution.
	trainsim_desc descs[2];
	uint32_t n = 0;
	if (model->exec_compute_ns >= 0)
		descs[n++] = trainsim_desc{TRAINSIM_DESC_OP_COMPUTE, static_cast<uint32_t>(model->nc),
					   static_cast<uint64_t>(model->exec_compute_ns)};
	descs[n++] = trainsim_desc{TRAINSIM_DESC_OP_EXEC, static_cast<uint32_t>(model->nc), seq};
	neuron_arg_dma_copy_descriptors64 cd{};
	cd.mem_handle = model->ring_handle;
	cd.buffer = reinterpret_cast<uint64_t>(descs);
	cd.num_descs = n;
	cd.offset = (seq % (TRAINSIM_NQ_ENTRIES / n)) * n * sizeof(trainsim_desc);
	if (NRT_STATUS st = dev_ioctl(NEURON_CMD_DMA_COPY_DESCRIPTORS64, &cd, "DMA_COPY_DESCRIPTORS64"))
		return st;
	// 2. Kick the input queues, then the execution queue (engine 0) last:
	// user space cannot ring doorbells itself, so every kick is an ioctl.
	for (uint32_t q = model->neff.input_queues; q-- > 0;) {
		neuron_arg_dma_queue_copy_start k{q, 0, 1, 1};
		if (NRT_STATUS st = dev_ioctl(NEURON_CMD_DMA_QUEUE_COPY_START, &k, "DMA_QUEUE_COPY_START"))
			return st;
	}
	info.t_kicked_ns = now_ns();
	info.rd_kicked_ns = static_cast<uint64_t>(run_delay.read());
	trainsim::nrt_signals::proxy_arm();

	// 3. Wait like libnrt: poll the NQ entry in host memory, yield between
	// polls. No blocking syscall, so the kernel only sees a runnable thread
	// calling sched_yield.
	volatile trainsim_nq_entry *e = &r.nq[seq % TRAINSIM_NQ_ENTRIES];
	uint64_t deadline = info.t_enter_ns + r.exec_timeout_ns;
	while (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != seq) {
		if (now_ns() > deadline) {
			fprintf(stderr, "nrt: execution %lu timed out\n", static_cast<unsigned long>(seq));
			info.status = NRT_TIMEOUT;
			trainsim::nrt_signals::proxy_disarm();
			r.last = info;
			r.have_last = true;
			return NRT_TIMEOUT;
		}
		sched_yield();
		info.polls++;
	}
	info.t_seen_ns = now_ns();
	info.rd_seen_ns = static_cast<uint64_t>(run_delay.read());
	info.t_dev_start_ns = e->t_start_ns;
	info.t_compute_end_ns = e->t_compute_end_ns;
	info.t_cc_ready_ns = e->t_cc_ready_ns;
	info.t_done_ns = e->t_done_ns;
	info.planned_compute_ns = e->planned_compute_ns;
	info.planned_cc_xfer_ns = e->planned_cc_xfer_ns;
	info.status = e->status;
	trainsim::nrt_signals::proxy_disarm();
	// Per-execution metrics into the datastore: memory writes, no syscall.
	trainsim::nrt_signals::nds_record(model->nc, info);

	// 4. Give the completed descriptors back.
	neuron_arg_dma_ack_completed ack{TRAINSIM_EXEC_ENGINE, 0, 1};
	NRT_STATUS st = dev_ioctl(NEURON_CMD_DMA_ACK_COMPLETED, &ack, "DMA_ACK_COMPLETED");
	info.t_return_ns = now_ns();
	info.rd_return_ns = static_cast<uint64_t>(run_delay.read());
	r.last = info;
	r.have_last = true;
	if (info.status)
		return static_cast<NRT_STATUS>(info.status);
	return st;
}

int trainsim_nrt_set_compute_ns(nrt_model_t *model, uint64_t compute_ns)
{
	if (!model || compute_ns > static_cast<uint64_t>(INT64_MAX))
		return -1;
	model->exec_compute_ns = static_cast<int64_t>(compute_ns);
	return 0;
}

int trainsim_nrt_last_exec(struct trainsim_exec_info *out)
{
	if (!out || !rt().have_last)
		return -1;
	*out = rt().last;
	return 0;
}

void trainsim_nrt_net_traffic(uint64_t tx_bytes, uint64_t rx_bytes)
{
	trainsim::nrt_signals::efa_messages(tx_bytes, rx_bytes);
}

int trainsim_nrt_verb_calls(struct trainsim_verb_call *out, int max)
{
	return trainsim::nrt_verbs::calls(out, max);
}

int trainsim_nrt_register_buffer(uint64_t bytes)
{
	return trainsim::nrt_verbs::register_once(bytes);
}

const char *trainsim_nrt_device_path(void)
{
	return rt().fd >= 0 ? rt().path.c_str() : nullptr;
}

} // extern "C"
