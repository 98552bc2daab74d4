// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// node_net.h - simulated nodes in their own network namespaces
// (--node-netns/--node-addrs): the launcher makes each rank's host-collective
// listener inside its node's namespace, on its node's address, and each rank
// joins its node's namespace before it connects, so the ring's hops between
// nodes cross the links a test built between the namespaces (veth with tc
// rate and delay) instead of this host's loopback.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/knobs.h"

namespace trainsim {

// Why --node-netns/--node-addrs cannot be used as given ("" when they can:
// both empty, or one namespace name and one IPv4 address per node).
std::string node_netns_problem(const Knobs &k);

class NodeNet {
public:
	NodeNet() = default;
	~NodeNet();
	NodeNet(const NodeNet &) = delete;
	NodeNet &operator=(const NodeNet &) = delete;

	// Opens every node's namespace and this process's own. False: *err.
	bool open(const Knobs &k, std::string *err);
	bool active() const { return !ns_fds_.empty(); }
	// Node n's address in network byte order (loopback when not active).
	uint32_t addr(int node) const;
	// Joins node n's namespace (nothing when not active); `home` returns to
	// the one open() found.
	bool enter(int node, std::string *err) const;
	bool home(std::string *err) const;
	// The namespace file descriptors, for a child to close after enter().
	void close_all();

private:
	std::vector<int> ns_fds_;
	std::vector<uint32_t> addrs_;
	int home_fd_ = -1;
};

} // namespace trainsim
