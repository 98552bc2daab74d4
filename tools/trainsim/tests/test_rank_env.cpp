// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The launcher variables of a rank (sim/rank_env.h) and --nnodes: their
// values, the CLI check, and ([root]) what /proc/PID/environ shows of a
// process that exported them and of a real 4-rank, 2-node job's ranks and
// loaders while it runs.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/cli.h"
#include "sim/clock.h"
#include "sim/launcher.h"
#include "sim/rank_env.h"
#include "tests/root_util.h"
#include "truth.h"

namespace fs = std::filesystem;
namespace tr = trainsim::truth;
using namespace roottest;
using Env = std::map<std::string, std::string>;

namespace {

// /proc/PID/environ as name -> value ("" when unreadable).
Env read_environ(const std::string &pid)
{
	Env env;
	std::string block = slurp("/proc/" + pid + "/environ");
	for (size_t at = 0; at < block.size();) {
		size_t nul = block.find('\0', at);
		std::string kv = block.substr(at, nul == std::string::npos ? std::string::npos : nul - at);
		size_t eq = kv.find('=');
		if (eq != std::string::npos)
			env[kv.substr(0, eq)] = kv.substr(eq + 1);
		if (nul == std::string::npos)
			break;
		at = nul + 1;
	}
	return env;
}

// The parent pid of /proc/PID (-1 when it is gone).
int ppid_of(const std::string &pid)
{
	std::string stat = slurp("/proc/" + pid + "/stat");
	size_t rp = stat.rfind(')');
	return rp == std::string::npos || rp + 4 >= stat.size() ? -1 : atoi(stat.c_str() + rp + 4);
}

struct Seen {
	std::map<int, Env> ranks;   // rank pid -> its environ, once it carries RANK
	std::map<int, Env> loaders; // loader pid (a child of a rank) -> its environ
	std::map<int, int> loader_parent;
};

// The process's cgroup v2 path ("0::/a/b" in /proc/PID/cgroup), kept in its
// Env under "@cgroup".
std::string v2_cgroup_of(const std::string &pid)
{
	std::string all = slurp("/proc/" + pid + "/cgroup");
	size_t at = all.rfind("0::", 0) == 0 ? 0 : all.find("\n0::");
	if (at == std::string::npos)
		return "";
	at += at == 0 ? 3 : 4;
	return all.substr(at, all.find('\n', at) - at);
}

// One look at /proc: the launcher's children that carry RANK, and their
// children.
void look(pid_t launcher, Seen &seen)
{
	std::error_code ec;
	std::vector<std::string> pids;
	for (const auto &e : fs::directory_iterator("/proc", ec)) {
		std::string name = e.path().filename();
		if (name.find_first_not_of("0123456789") == std::string::npos)
			pids.push_back(name);
	}
	for (const auto &p : pids) {
		int pid = atoi(p.c_str());
		if (ppid_of(p) != launcher || seen.ranks.count(pid) || slurp("/proc/" + p + "/comm") != "trainsim-main\n")
			continue;
		Env env = read_environ(p);
		if (env.count("RANK")) { // else not exported yet (or not a rank)
			env["@cgroup"] = v2_cgroup_of(p);
			seen.ranks[pid] = env;
		}
	}
	for (const auto &p : pids) {
		int pid = atoi(p.c_str()), parent = ppid_of(p);
		if (seen.ranks.count(parent) && !seen.loaders.count(pid)) {
			Env env = read_environ(p);
			if (!env.empty()) {
				env["@cgroup"] = v2_cgroup_of(p);
				seen.loaders[pid] = env;
				seen.loader_parent[pid] = parent;
			}
		}
	}
}

bool exited(pid_t pid, int *code)
{
	int status = 0;
	if (waitpid(pid, &status, WNOHANG) != pid)
		return false;
	*code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return true;
}

} // namespace

TEST_CASE("launcher variables: torchrun's values for 4 ranks on 2 nodes", "[unit][rank_env]")
{
	CHECK(trainsim::node_of(0, 4, 2) == 0);
	CHECK(trainsim::node_of(1, 4, 2) == 0);
	CHECK(trainsim::node_of(2, 4, 2) == 1);
	CHECK(trainsim::node_of(3, 4, 2) == 1);
	CHECK(trainsim::node_of(5, 6, 1) == 0);
	CHECK(trainsim::node_of(5, 6, 6) == 5);
	Env env;
	for (const auto &[k, v] : trainsim::launcher_env(3, 4, 2, 4321, 41000))
		env[k] = v;
	CHECK(env["RANK"] == "3");
	CHECK(env["WORLD_SIZE"] == "4");
	CHECK(env["LOCAL_RANK"] == "1");
	CHECK(env["LOCAL_WORLD_SIZE"] == "2");
	CHECK(env["GROUP_RANK"] == "1");
	CHECK(env["NODE_RANK"] == "1");
	CHECK(env["GROUP_WORLD_SIZE"] == "2");
	CHECK(env["TORCHELASTIC_RUN_ID"] == "trainsim-4321");
	CHECK(env["MASTER_ADDR"] == "127.0.0.1");
	CHECK(env["MASTER_PORT"] == "41000");
	CHECK(trainsim::environ_block({"A=1", "B=x y"}) == std::string("A=1\0B=x y\0", 10));
}

TEST_CASE("CLI: --nnodes defaults to 1 and must divide --ranks", "[unit][cli][rank_env]")
{
	auto d = trainsim::parse_cli(std::vector<std::string>{});
	REQUIRE(d.run);
	CHECK(d.knobs.nnodes == 1);
	auto ok = trainsim::parse_cli({"--ranks", "4", "--nnodes", "2"});
	REQUIRE(ok.run);
	CHECK(ok.knobs.nnodes == 2);
	CHECK_THAT(trainsim::knobs_to_json(ok.knobs), Catch::Contains("\"nnodes\":2"));
	for (std::vector<std::string> bad : {std::vector<std::string>{"--ranks", "4", "--nnodes", "3"},
					     std::vector<std::string>{"--ranks", "2", "--nnodes", "0"},
					     std::vector<std::string>{"--ranks", "2", "--nnodes", "4"}}) {
		auto r = trainsim::parse_cli(bad);
		INFO(bad[3]);
		CHECK_FALSE(r.run);
		CHECK(r.code == 2);
		CHECK_THAT(r.error, Catch::Contains("--nnodes"));
	}
}

TEST_CASE("export_launcher_env: /proc/self/environ shows the variables, a forked child too", "[root][rank_env]")
{
	if (geteuid() != 0) {
		WARN("skipped: needs CAP_SYS_RESOURCE (root)");
		return;
	}
	int p[2];
	REQUIRE(pipe(p) == 0);
	pid_t pid = fork();
	if (pid == 0) { // the test's own environment stays as it is
		close(p[0]);
		bool ok = trainsim::export_launcher_env(trainsim::launcher_env(2, 4, 2, 77, 29500), 2);
		Env self = read_environ("self");
		pid_t child = fork();
		if (child == 0)
			_exit(read_environ("self") == self ? 0 : 1);
		int status = 0;
		waitpid(child, &status, 0);
		bool same = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		std::string got = std::string(ok ? "ok" : "failed") + " " + self["RANK"] + " " + self["NODE_RANK"] + " " +
				  self["LOCAL_RANK"] + " " + self["TORCHELASTIC_RUN_ID"] + " " + self["PATH"].substr(0, 1) +
				  " " + (getenv("RANK") ? getenv("RANK") : "-") + " " + (same ? "child-same" : "child-differs");
		(void)!write(p[1], got.data(), got.size());
		_exit(0);
	}
	close(p[1]);
	std::string got;
	char buf[256];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof(buf))) > 0)
		got.append(buf, static_cast<size_t>(n));
	close(p[0]);
	CHECK(wait_exit(pid) == 0);
	// PATH: the rest of the environment is still in the block.
	std::string path0 = getenv("PATH") ? std::string(getenv("PATH")).substr(0, 1) : "";
	CHECK(got == "ok 2 1 0 trainsim-77 " + path0 + " 2 child-same");
}

TEST_CASE("trainsim --nnodes 2 --node-cgroups: 4 ranks carry torchrun's variables in /proc/PID/environ, each node "
	  "in its own cgroup", "[root][rank_env]")
{
	if (!can_fuse())
		return;
	std::string dir = temp_dir("trainsim-test-env-");
	pid_t pid = spawn({kBin + "/trainsim", "-r", "4", "--nnodes", "2", "--node-cgroups", "-s", "6", "--scenario", "straggler",
			   "--truth", dir + "/truth.json", "--dev-dir", dir + "/dev"},
			  dir + "/log");
	Seen seen;
	int code = -1;
	for (int64_t deadline = trainsim::now_ns() + 60000000000; trainsim::now_ns() < deadline; usleep(10000)) {
		if (exited(pid, &code))
			break;
		look(pid, seen);
	}
	if (code < 0) {
		kill(pid, SIGTERM);
		code = wait_exit(pid);
	}
	std::string log = slurp(dir + "/log"), err;
	auto t = tr::load(dir + "/truth.json", &err);
	bool mounted = trainsim::is_mount_point(dir + "/dev");
	if (!mounted)
		fs::remove_all(dir);
	INFO(log);
	CHECK_FALSE(mounted);
	REQUIRE(code == 0);
	CHECK(log.find("cannot expose") == std::string::npos);

	REQUIRE(seen.ranks.size() == 4);
	std::set<int> ranks;
	std::set<std::string> run_ids, ports;
	for (auto &[rpid, env] : seen.ranks) {
		int r = atoi(env["RANK"].c_str());
		INFO("pid " << rpid << " RANK " << r);
		ranks.insert(r);
		CHECK(env["WORLD_SIZE"] == "4");
		CHECK(env["LOCAL_WORLD_SIZE"] == "2");
		CHECK(env["LOCAL_RANK"] == std::to_string(r % 2));
		CHECK(env["NODE_RANK"] == std::to_string(r / 2));
		CHECK(env["GROUP_RANK"] == std::to_string(r / 2));
		CHECK(env["MASTER_ADDR"] == "127.0.0.1");
		run_ids.insert(env["TORCHELASTIC_RUN_ID"]);
		ports.insert(env["MASTER_PORT"]);
	}
	CHECK(ranks == std::set<int>{0, 1, 2, 3});
	REQUIRE(run_ids.size() == 1);
	CHECK(*run_ids.begin() == "trainsim-" + std::to_string(pid));
	// straggler has a host all-reduce: MASTER_PORT is rank 0's listener.
	REQUIRE(ports.size() == 1);
	CHECK(atoi(ports.begin()->c_str()) > 0);
	CHECK(*ports.begin() != "29500");
	// Loaders forked after the export inherit the block.
	CHECK_FALSE(seen.loaders.empty());
	for (auto &[lpid, env] : seen.loaders) {
		INFO("loader " << lpid);
		CHECK(env["RANK"] == seen.ranks[seen.loader_parent[lpid]]["RANK"]);
	}

	REQUIRE(t);
	CHECK(t->nnodes == 2);
	REQUIRE(t->rank_data.size() == 4);
	std::vector<int> nodes;
	for (const auto &r : t->rank_data) {
		nodes.push_back(r.node);
		if (seen.ranks.count(r.pid))
			CHECK(seen.ranks[r.pid]["RANK"] == std::to_string(r.rank));
	}
	CHECK(nodes == std::vector<int>{0, 0, 1, 1});

	// --node-cgroups: each rank in trainsim-<pid>/node<N>/rank<R> from its
	// fork on, its loaders with it; the groups are gone once trainsim ends.
	const std::string top = "/trainsim-" + std::to_string(pid);
	for (auto &[rpid, env] : seen.ranks) {
		int r = atoi(env["RANK"].c_str());
		CHECK(env["@cgroup"] == top + "/node" + std::to_string(r / 2) + "/rank" + std::to_string(r));
	}
	for (auto &[lpid, env] : seen.loaders) {
		INFO("loader " << lpid);
		CHECK(env["@cgroup"] == seen.ranks[seen.loader_parent[lpid]]["@cgroup"]);
	}
	for (const auto &r : t->rank_data) {
		INFO("rank " << r.rank << " " << r.node_cgroup);
		const std::string want = top + "/node" + std::to_string(r.node) + "/rank" + std::to_string(r.rank);
		REQUIRE(r.node_cgroup.size() > want.size());
		CHECK(r.node_cgroup.substr(r.node_cgroup.size() - want.size()) == want);
		CHECK_FALSE(fs::exists(r.node_cgroup.substr(0, r.node_cgroup.size() - want.size()) + top));
	}
}
