// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// collective.h - a gloo-like host all-reduce: a ring over loopback TCP that
// moves real bytes and sums real floats. Rate limiting uses the kernel's own
// TCP pacing (SO_MAX_PACING_RATE; internal pacing works without the fq
// qdisc since Linux 4.13), so the waits the tracer sees are real socket
// waits, not sleeps in the application.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// Creates a listening socket on an ephemeral port of `addr` (IPv4, network
// order: loopback, or the rank's node address in its namespace). The
// launcher makes one per rank before forking so every rank knows every port.
int make_listener(uint32_t addr, uint16_t *port, std::string *err);

class HostCollective {
public:
	HostCollective() = default;
	~HostCollective();
	HostCollective(const HostCollective &) = delete;
	HostCollective &operator=(const HostCollective &) = delete;

	// Joins the ring: accepts the previous rank on `listen_fd` and connects
	// to the next rank's port. pacing_bytes_per_s 0 means unpaced.
	bool connect(int rank, int world, int listen_fd, uint32_t next_addr, uint16_t next_port,
		     uint64_t pacing_bytes_per_s, std::string *err);
	// Ring all-reduce (sum) in place: reduce-scatter then all-gather.
	bool allreduce(float *data, size_t count, std::string *err);
	uint64_t bytes_sent() const { return bytes_sent_; }
	// How long connect and each exchange wait for a peer before failing
	// (default 30 s; longer when a rank is planned to hang).
	void set_timeout_ms(int ms) { timeout_ms_ = ms; }
	void close();

private:
	// Sends `send` to the next rank while receiving `recv_len` bytes from the
	// previous one, without deadlocking on full socket buffers.
	bool exchange(const char *send, size_t send_len, char *recv, size_t recv_len, std::string *err);

	int rank_ = 0, world_ = 1;
	int next_fd_ = -1, prev_fd_ = -1;
	uint64_t bytes_sent_ = 0;
	int timeout_ms_ = 30000;
	std::vector<float> scratch_;
};

} // namespace trainsim
