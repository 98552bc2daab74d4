// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "efa/efa_port.h"

#include <cstdio>
#include <filesystem>
#include <utility>

namespace trainsim::efa {

namespace {
constexpr uint64_t kMtu = 8192; // bytes per packet for the packet counters

void write_value(const std::string &path, const std::string &text)
{
	std::string tmp = path + ".tmp";
	if (FILE *f = fopen(tmp.c_str(), "w")) {
		fputs(text.c_str(), f);
		fclose(f);
		rename(tmp.c_str(), path.c_str());
	}
}
} // namespace

std::string rate_text(double gbit)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%g Gb/sec (4X)\n", gbit);
	return buf;
}

bool Port::open(const std::string &sysfs_root, int index, double rate_gbit)
{
	if (sysfs_root.empty() || index < 0)
		return false;
	std::string base = sysfs_root + "/class/infiniband/efa_" + std::to_string(index);
	std::error_code ec;
	std::filesystem::create_directories(base + "/ports/1/hw_counters", ec);
	std::filesystem::create_directories(base + "/hw_counters", ec);
	if (ec)
		return false;
	write_value(base + "/ports/1/rate", rate_text(rate_gbit));
	write_value(base + "/ports/1/hw_counters/lifespan", "10\n");
	std::lock_guard lk(mu_);
	dir_ = base + "/ports/1/hw_counters";
	write_all(dir_, snapshot());
	if (!flusher_.joinable())
		flusher_ = std::thread(&Port::flusher_loop, this);
	return true;
}

Port::~Port()
{
	{
		std::lock_guard lk(mu_);
		stop_ = true;
	}
	cv_.notify_one();
	if (flusher_.joinable())
		flusher_.join();
}

Port::Values Port::snapshot() const
{
	return Values{tx_bytes_,  tx_pkts_,  rx_bytes_,        rx_pkts_,        send_bytes_,          send_wrs_,
		      recv_bytes_, recv_wrs_, rdma_write_bytes_, rdma_write_wrs_, rdma_write_recv_bytes_};
}

void Port::changed()
{
	dirty_ = true;
	cv_.notify_one();
}

void Port::flusher_loop()
{
	std::unique_lock lk(mu_);
	for (;;) {
		cv_.wait(lk, [&] { return dirty_ || stop_; });
		if (dirty_) {
			dirty_ = false;
			Values v = snapshot();
			std::string dir = dir_;
			lk.unlock();
			write_all(dir, v);
			lk.lock();
		}
		if (stop_ && !dirty_)
			return;
	}
}

void Port::write_all(const std::string &dir, const Values &v)
{
	const std::pair<const char *, uint64_t> rows[] = {
		{"tx_bytes", v.tx_bytes},
		{"tx_pkts", v.tx_pkts},
		{"rx_bytes", v.rx_bytes},
		{"rx_pkts", v.rx_pkts},
		{"rx_drops", 0},
		{"send_bytes", v.send_bytes},
		{"send_wrs", v.send_wrs},
		{"recv_bytes", v.recv_bytes},
		{"recv_wrs", v.recv_wrs},
		{"rdma_read_wrs", 0},
		{"rdma_read_bytes", 0},
		{"rdma_read_wr_err", 0},
		{"rdma_read_resp_bytes", 0},
		{"rdma_write_wrs", v.rdma_write_wrs},
		{"rdma_write_bytes", v.rdma_write_bytes},
		{"rdma_write_wr_err", 0},
		{"rdma_write_recv_bytes", v.rdma_write_recv_bytes},
		{"retrans_bytes", 0},
		{"retrans_pkts", 0},
		{"retrans_timeout_events", 0},
		{"unresponsive_remote_events", 0},
		{"impaired_remote_conn_events", 0},
	};
	for (const auto &[name, value] : rows)
		write_value(dir + "/" + name, std::to_string(value) + "\n");
}

void Port::add_wire(uint64_t tx, uint64_t rx)
{
	tx_bytes_ += tx;
	rx_bytes_ += rx;
	tx_pkts_ += (tx + kMtu - 1) / kMtu;
	rx_pkts_ += (rx + kMtu - 1) / kMtu;
}

void Port::add_messages(uint64_t tx, uint64_t rx)
{
	std::lock_guard lk(mu_);
	if (dir_.empty())
		return;
	add_wire(tx, rx);
	send_bytes_ += tx;
	recv_bytes_ += rx;
	send_wrs_ += tx ? 1 : 0;
	recv_wrs_ += rx ? 1 : 0;
	changed();
}

void Port::add_rdma_write(uint64_t tx, uint64_t rx)
{
	std::lock_guard lk(mu_);
	if (dir_.empty())
		return;
	add_wire(tx, rx);
	rdma_write_bytes_ += tx;
	rdma_write_recv_bytes_ += rx;
	rdma_write_wrs_ += tx ? 1 : 0;
	// The caller is the runtime's proxy thread, which is off the step's
	// critical path, and a flusher running inside every device collective
	// would look like a second proxy: write here.
	write_all(dir_, snapshot());
}

} // namespace trainsim::efa
