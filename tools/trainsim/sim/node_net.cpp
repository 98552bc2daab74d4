// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/node_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace trainsim {

namespace {

std::vector<std::string> split_csv(const std::string &s)
{
	std::vector<std::string> out;
	if (s.empty())
		return out;
	std::string item;
	std::istringstream in(s);
	while (std::getline(in, item, ','))
		out.push_back(item);
	return out;
}

bool valid_ns_name(const std::string &n)
{
	if (n.empty() || n == "." || n == "..")
		return false;
	for (char c : n)
		if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
			return false;
	return true;
}

} // namespace

std::string node_netns_problem(const Knobs &k)
{
	const auto names = split_csv(k.node_netns);
	const auto addrs = split_csv(k.node_addrs);
	if (names.empty() && addrs.empty())
		return "";
	std::ostringstream e;
	if (names.size() != static_cast<size_t>(k.nnodes) || addrs.size() != static_cast<size_t>(k.nnodes)) {
		e << "--node-netns and --node-addrs need one entry per node (" << k.nnodes << "), got " << names.size()
		  << " and " << addrs.size();
		return e.str();
	}
	for (const auto &n : names)
		if (!valid_ns_name(n))
			return "--node-netns: '" + n + "' is not a namespace name under /run/netns";
	for (const auto &a : addrs) {
		in_addr x{};
		if (inet_pton(AF_INET, a.c_str(), &x) != 1)
			return "--node-addrs: '" + a + "' is not an IPv4 address";
	}
	return "";
}

NodeNet::~NodeNet()
{
	close_all();
}

void NodeNet::close_all()
{
	for (int fd : ns_fds_)
		close(fd);
	ns_fds_.clear();
	if (home_fd_ >= 0)
		close(home_fd_);
	home_fd_ = -1;
}

bool NodeNet::open(const Knobs &k, std::string *err)
{
	const auto names = split_csv(k.node_netns);
	const auto addrs = split_csv(k.node_addrs);
	if (names.empty())
		return true;
	home_fd_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home_fd_ < 0) {
		*err = std::string("open /proc/self/ns/net: ") + strerror(errno);
		return false;
	}
	for (size_t n = 0; n < names.size(); n++) {
		const std::string path = "/run/netns/" + names[n];
		int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			*err = "open " + path + ": " + strerror(errno) + " (create it with: ip netns add " + names[n] + ")";
			close_all();
			return false;
		}
		ns_fds_.push_back(fd);
		in_addr x{};
		inet_pton(AF_INET, addrs[n].c_str(), &x);
		addrs_.push_back(x.s_addr);
	}
	return true;
}

uint32_t NodeNet::addr(int node) const
{
	if (!active() || node < 0 || static_cast<size_t>(node) >= addrs_.size())
		return htonl(INADDR_LOOPBACK);
	return addrs_[static_cast<size_t>(node)];
}

bool NodeNet::enter(int node, std::string *err) const
{
	if (!active())
		return true;
	if (setns(ns_fds_[static_cast<size_t>(node)], CLONE_NEWNET) != 0) {
		*err = std::string("setns into node ") + std::to_string(node) + "'s network namespace: " + strerror(errno);
		return false;
	}
	return true;
}

bool NodeNet::home(std::string *err) const
{
	if (!active())
		return true;
	if (setns(home_fd_, CLONE_NEWNET) != 0) {
		*err = std::string("setns back to the launcher's network namespace: ") + strerror(errno);
		return false;
	}
	return true;
}

} // namespace trainsim
