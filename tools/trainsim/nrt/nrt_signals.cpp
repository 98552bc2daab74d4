// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "nrt/nrt_signals.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "device/nds_layout.h"
#include "efa/efa_port.h"
#include "sim_protocol.h"

namespace trainsim::nrt_signals {

namespace {

uint8_t *g_nds = nullptr;
size_t g_nds_size = 0;
efa::Port g_efa;

std::atomic<uint64_t> *word(uint64_t off)
{
	return reinterpret_cast<std::atomic<uint64_t> *>(g_nds + off);
}

int device_index(const std::string &path)
{
	size_t i = path.size();
	while (i > 0 && path[i - 1] >= '0' && path[i - 1] <= '9')
		i--;
	return i == path.size() ? -1 : atoi(path.c_str() + i);
}

void sleep_ns(uint64_t ns)
{
	timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0) {
	}
}

struct Proxy {
	std::mutex mu;
	std::condition_variable cv;
	bool armed = false, stop = false;
	trainsim_proxy_mailbox *mb = nullptr;
	uint64_t last_seq = 0;
	int ranks = 1;
	std::thread th;
};
Proxy g_proxy;

void proxy_loop(int nc)
{
	// libnccom's proxy threads drive EFA for the device's collectives; the
	// real comm name is not documented (verify on a host), the sim uses
	// the library's name.
	char name[16];
	snprintf(name, sizeof(name), "nccom-proxy%d", nc);
	prctl(PR_SET_NAME, name);
	prctl(PR_SET_TIMERSLACK, 1UL);
	Proxy &p = g_proxy;
	for (;;) {
		{
			std::unique_lock lk(p.mu);
			p.cv.wait(lk, [&] { return p.stop || p.armed; });
			if (p.stop)
				return;
		}
		// Poll the mailbox while an execution is in flight (a real proxy
		// polls its completion queues; this one naps 100 us between polls).
		uint64_t seq = __atomic_load_n(&p.mb->req_seq, __ATOMIC_ACQUIRE);
		if (seq == p.last_seq) {
			std::unique_lock lk(p.mu);
			if (!p.armed || p.stop)
				continue;
			lk.unlock();
			sleep_ns(100000);
			continue;
		}
		uint64_t bytes = p.mb->bytes, xfer = p.mb->xfer_ns;
		// The network work: the ring all-reduce's transfer at the link rate.
		sleep_ns(xfer);
		uint64_t wire = p.ranks > 1 ? 2 * bytes * static_cast<uint64_t>(p.ranks - 1) / static_cast<uint64_t>(p.ranks) : 0;
		p.last_seq = seq;
		__atomic_store_n(&p.mb->done_seq, seq, __ATOMIC_RELEASE);
		// Counted after the transfer is done: the sim's file writes must not
		// lengthen the device collective (an adapter counts in hardware).
		g_efa.add_rdma_write(wire, wire);
	}
}

} // namespace

bool nds_attach(const std::string &dev_path, uint64_t mmap_offset, uint32_t size)
{
	if (size < 67200)
		return false;
	// Same mapping a reader makes: (offset, size) of the window the device
	// names next to the device file (sim_protocol.h).
	int fd = open((dev_path + TRAINSIM_NDS_WINDOW_SUFFIX).c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(mmap_offset));
	close(fd);
	if (p == MAP_FAILED)
		return false;
	g_nds = static_cast<uint8_t *>(p);
	g_nds_size = size;
	memcpy(g_nds, "nds", 4);
	uint32_t ver = nds::kHeaderVersion;
	memcpy(g_nds + 4, &ver, sizeof(ver));
	// ND counters: runtime version 2.31.0 (packed), framework pytorch.
	word(nds::nd_counter_offset(0))->store((2ull << 40) | (31ull << 32) | 24ull);
	word(nds::nd_counter_offset(1))->store((3ull << 48) | (2ull << 40) | (1ull << 32));
	return true;
}

void nds_detach()
{
	if (g_nds)
		munmap(g_nds, g_nds_size);
	g_nds = nullptr;
}

void nds_record(int nc, const trainsim_exec_info &e)
{
	if (!g_nds)
		return;
	auto at = [&](int k) { return word(nds::nc_counter_offset(nc, k)); };
	double dev = static_cast<double>(e.t_done_ns - e.t_dev_start_ns) / 1e9;
	double compute = static_cast<double>(e.t_compute_end_ns - e.t_dev_start_ns) / 1e9;
	double cc = static_cast<double>(e.t_done_ns - e.t_compute_end_ns) / 1e9;
	double total = static_cast<double>(e.t_seen_ns - e.t_enter_ns) / 1e9;
	// Last-value words first ("set"), then the cumulative counters (locked
	// adds); a reader that sees the new count sees this execution's values.
	at(nds::LATENCY_DEVICE)->store(nds::seconds_bits(dev), std::memory_order_relaxed);
	at(nds::LATENCY_TOTAL)->store(nds::seconds_bits(total), std::memory_order_relaxed);
	at(nds::NC_TIME)->store(nds::seconds_bits(compute), std::memory_order_relaxed);
	at(nds::CC_TIME)->store(nds::seconds_bits(cc), std::memory_order_relaxed);
	at(nds::TIME_IN_USE)->fetch_add((e.t_done_ns - e.t_dev_start_ns) / 1000);
	at(nds::MAC_COUNT)->fetch_add((e.t_compute_end_ns - e.t_dev_start_ns) * 1000);
	if (e.status == 0)
		at(nds::INFER_COMPLETED)->fetch_add(1);
	else if (e.status == NRT_TIMEOUT)
		at(nds::INFER_TIMED_OUT)->fetch_add(1);
	else if (e.status == NRT_EXEC_HW_ERR_COLLECTIVES)
		at(nds::HW_ERR_COLLECTIVES)->fetch_add(1);
	else
		at(nds::GENERIC_FAIL)->fetch_add(1);
	at(nds::INFERENCE_COUNT)->fetch_add(1, std::memory_order_release);
}

void efa_open(const std::string &dev_path)
{
	const char *root = getenv("TRAINSIM_SYSFS_ROOT");
	if (!root || !*root || g_efa.enabled())
		return;
	const char *rate = getenv("TRAINSIM_EFA_GBIT");
	g_efa.open(root, device_index(dev_path), rate ? atof(rate) : 100.0);
}

void efa_messages(uint64_t tx, uint64_t rx) { g_efa.add_messages(tx, rx); }

bool proxy_start(int nc, int ranks, bool (*register_fn)(uint64_t addr, uint32_t size, int nc))
{
	Proxy &p = g_proxy;
	if (p.th.joinable())
		return true;
	void *mb = aligned_alloc(4096, 4096);
	if (!mb)
		return false;
	memset(mb, 0, 4096);
	p.mb = static_cast<trainsim_proxy_mailbox *>(mb);
	p.ranks = ranks;
	p.last_seq = 0;
	p.stop = p.armed = false;
	if (!register_fn(reinterpret_cast<uint64_t>(mb), 4096, nc))
		return false; // the mailbox is leaked on purpose (a late device write)
	p.th = std::thread(proxy_loop, nc);
	return true;
}

void proxy_arm()
{
	if (!g_proxy.th.joinable())
		return;
	{
		std::lock_guard lk(g_proxy.mu);
		g_proxy.armed = true;
	}
	g_proxy.cv.notify_one();
}

void proxy_disarm()
{
	if (!g_proxy.th.joinable())
		return;
	std::lock_guard lk(g_proxy.mu);
	g_proxy.armed = false;
}

void proxy_stop()
{
	if (!g_proxy.th.joinable())
		return;
	{
		std::lock_guard lk(g_proxy.mu);
		g_proxy.stop = true;
	}
	g_proxy.cv.notify_one();
	g_proxy.th.join();
}

} // namespace trainsim::nrt_signals
