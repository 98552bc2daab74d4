// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/collective.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainsim {

namespace {

void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string sys_err(const char *what)
{
	return std::string(what) + ": " + strerror(errno);
}
} // namespace

int make_listener(uint32_t addr, uint16_t *port, std::string *err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err = sys_err("socket");
		return -1;
	}
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = addr;
	socklen_t len = sizeof(a);
	if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 || listen(fd, 16) != 0 ||
	    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
		*err = sys_err("bind/listen for the host collective");
		::close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

HostCollective::~HostCollective()
{
	close();
}

void HostCollective::close()
{
	if (next_fd_ >= 0)
		::close(next_fd_);
	if (prev_fd_ >= 0)
		::close(prev_fd_);
	next_fd_ = prev_fd_ = -1;
}

bool HostCollective::connect(int rank, int world, int listen_fd, uint32_t next_addr, uint16_t next_port,
			     uint64_t pacing, std::string *err)
{
	rank_ = rank;
	world_ = world;
	if (world <= 1)
		return true;
	next_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (next_fd_ < 0) {
		*err = sys_err("socket");
		return false;
	}
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = next_addr;
	a.sin_port = htons(next_port);
	// The peer's listener exists before any rank starts, so connect lands in
	// its backlog even if the peer has not reached accept() yet.
	if (::connect(next_fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
		*err = sys_err("connect to next rank");
		return false;
	}
	pollfd p{listen_fd, POLLIN, 0};
	if (poll(&p, 1, timeout_ms_) != 1) {
		*err = "previous rank never connected";
		return false;
	}
	prev_fd_ = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
	if (prev_fd_ < 0) {
		*err = sys_err("accept previous rank");
		return false;
	}
	int one = 1;
	setsockopt(next_fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(prev_fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (pacing > 0) {
		unsigned long rate = pacing;
		if (setsockopt(next_fd_, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate)) != 0) {
			*err = sys_err("SO_MAX_PACING_RATE");
			return false;
		}
	}
	set_nonblock(next_fd_);
	set_nonblock(prev_fd_);
	return true;
}

bool HostCollective::exchange(const char *send, size_t send_len, char *recv, size_t recv_len, std::string *err)
{
	size_t sent = 0, got = 0;
	while (sent < send_len || got < recv_len) {
		pollfd p[2];
		int n = 0;
		int si = -1, ri = -1;
		if (sent < send_len) {
			si = n;
			p[n++] = {next_fd_, POLLOUT, 0};
		}
		if (got < recv_len) {
			ri = n;
			p[n++] = {prev_fd_, POLLIN, 0};
		}
		int rc = poll(p, static_cast<nfds_t>(n), timeout_ms_);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0) {
			*err = rc == 0 ? "host all-reduce timed out (a rank is gone?)" : sys_err("poll");
			return false;
		}
		if (si >= 0 && (p[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t k = ::send(next_fd_, send + sent, send_len - sent, MSG_NOSIGNAL);
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				*err = sys_err("send to next rank");
				return false;
			}
			if (k > 0) {
				sent += static_cast<size_t>(k);
				bytes_sent_ += static_cast<uint64_t>(k);
			}
		}
		if (ri >= 0 && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
			ssize_t k = ::recv(prev_fd_, recv + got, recv_len - got, 0);
			if (k == 0) {
				*err = "previous rank closed the connection";
				return false;
			}
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				*err = sys_err("recv from previous rank");
				return false;
			}
			if (k > 0)
				got += static_cast<size_t>(k);
		}
	}
	return true;
}

bool HostCollective::allreduce(float *data, size_t count, std::string *err)
{
	if (world_ <= 1 || count == 0)
		return true;
	const size_t W = static_cast<size_t>(world_);
	auto seg_begin = [&](size_t i) { return i * count / W; };
	auto seg_len = [&](size_t i) { return seg_begin(i + 1) - seg_begin(i); };
	auto mod = [&](long v) { return static_cast<size_t>(((v % world_) + world_) % world_); };
	scratch_.resize(count / W + 1);
	// Reduce-scatter: after W-1 steps rank r owns the full sum of segment r+1.
	for (int s = 0; s < world_ - 1; s++) {
		size_t si = mod(rank_ - s), ri = mod(rank_ - s - 1);
		if (!exchange(reinterpret_cast<const char *>(data + seg_begin(si)), seg_len(si) * sizeof(float),
			      reinterpret_cast<char *>(scratch_.data()), seg_len(ri) * sizeof(float), err))
			return false;
		float *dst = data + seg_begin(ri);
		for (size_t i = 0; i < seg_len(ri); i++)
			dst[i] += scratch_[i];
	}
	// All-gather: pass the reduced segments around the ring.
	for (int s = 0; s < world_ - 1; s++) {
		size_t si = mod(rank_ + 1 - s), ri = mod(rank_ - s);
		if (!exchange(reinterpret_cast<const char *>(data + seg_begin(si)), seg_len(si) * sizeof(float),
			      reinterpret_cast<char *>(data + seg_begin(ri)), seg_len(ri) * sizeof(float), err))
			return false;
	}
	return true;
}

} // namespace trainsim
