// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Why this file exists: torchrun exec()s each worker with RANK, WORLD_SIZE,
// ... in its environment, so they are in the process's initial environment
// block, which is what /proc/PID/environ shows (the kernel reads the mm's
// env_start..env_end, not the libc `environ` array). trainsim forks its
// ranks from the launcher without exec, so setenv() alone changes only the
// libc array: the block still holds the launcher's environment. A tracer
// that reads a process's identity from /proc/PID/environ would see none of
// it. So a rank also builds a new block holding its whole environment and
// points env_start/env_end at it with prctl(PR_SET_MM_ENV_START/END), which
// needs CAP_SYS_RESOURCE; without it, with PR_SET_MM_MAP, which needs none
// (checkpoint/restore kernels). The block must be anonymous memory (heap):
// the kernel reads it with FOLL_ANON and shows nothing from a file mapping
// such as .data. Loaders forked afterwards inherit the mm, block included.
#include "sim/rank_env.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char **environ;

namespace trainsim {

namespace {

// The mm's layout as /proc/self/stat shows it to the process itself
// (fields 26-28 and 45-51; the unprivileged would see 0 or 1 there).
struct MmLayout {
	unsigned long start_code = 0, end_code = 0, start_stack = 0;
	unsigned long start_data = 0, end_data = 0, start_brk = 0;
	unsigned long arg_start = 0, arg_end = 0, env_start = 0, env_end = 0;
};

bool read_layout(MmLayout *m)
{
	std::ifstream f("/proc/self/stat");
	std::string stat;
	std::getline(f, stat);
	size_t rp = stat.rfind(')');
	if (rp == std::string::npos || rp + 2 >= stat.size())
		return false;
	std::istringstream ss(stat.substr(rp + 2)); // from field 3 (state) on
	std::vector<unsigned long> v(52, 0);
	std::string tok;
	for (int field = 3; field < 52 && ss >> tok; field++)
		v[field] = strtoul(tok.c_str(), nullptr, 10);
	*m = MmLayout{v[26], v[27], v[28], v[45], v[46], v[47], v[48], v[49], v[50], v[51]};
	return m->start_code < m->end_code && m->env_start != 0 && m->env_start <= m->env_end;
}

int set_bound(int opt, unsigned long addr)
{
	return prctl(PR_SET_MM, opt, addr, 0, 0) == 0 ? 0 : errno;
}

// PR_SET_MM_ENV_START/END (CAP_SYS_RESOURCE). The kernel rejects a call
// that leaves env_start > env_end, so a block below the old one moves its
// start first and a block above it its end first. 0 or an errno.
int move_env_bounds(unsigned long start, unsigned long end, const MmLayout *old)
{
	bool start_first = !old || start <= old->env_end;
	int first = start_first ? PR_SET_MM_ENV_START : PR_SET_MM_ENV_END;
	int second = start_first ? PR_SET_MM_ENV_END : PR_SET_MM_ENV_START;
	int e = set_bound(first, start_first ? start : end);
	if (e == EINVAL && !old) { // the guess was wrong: the block is above the old one
		std::swap(first, second);
		start_first = false;
		e = set_bound(first, end);
	}
	if (e != 0)
		return e;
	e = set_bound(second, start_first ? end : start);
	if (e != 0 && old) // put the first bound back: never leave a half-moved block
		set_bound(first, start_first ? old->env_start : old->env_end);
	return e;
}

// PR_SET_MM_MAP (CONFIG_CHECKPOINT_RESTORE), which needs no capability
// when it leaves /proc/PID/exe alone: it rewrites the whole layout at
// once, so every other field gets the value it has now (brk from brk(0)).
int move_env_map(unsigned long start, unsigned long end, const MmLayout &m)
{
	prctl_mm_map map{};
	map.start_code = m.start_code;
	map.end_code = m.end_code;
	map.start_data = m.start_data;
	map.end_data = m.end_data;
	map.start_brk = m.start_brk;
	map.brk = static_cast<unsigned long>(syscall(SYS_brk, 0));
	map.start_stack = m.start_stack;
	map.arg_start = m.arg_start;
	map.arg_end = m.arg_end;
	map.env_start = start;
	map.env_end = end;
	map.exe_fd = static_cast<uint32_t>(-1);
	return prctl(PR_SET_MM, PR_SET_MM_MAP, &map, sizeof(map), 0) == 0 ? 0 : errno;
}

// Points env_start..env_end at [start, end): 0 or the errno of
// PR_SET_MM_ENV_START/END.
int move_env(unsigned long start, unsigned long end)
{
	MmLayout m;
	bool known = read_layout(&m);
	int e = move_env_bounds(start, end, known ? &m : nullptr);
	// Without CAP_SYS_RESOURCE (root in a container often lacks it).
	if (e == EPERM && known && move_env_map(start, end, m) == 0)
		return 0;
	return e;
}

} // namespace

int node_of(int rank, int ranks, int nnodes)
{
	int per_node = nnodes > 0 && ranks >= nnodes ? ranks / nnodes : 1;
	return rank / per_node;
}

std::vector<std::pair<std::string, std::string>> launcher_env(int rank, int ranks, int nnodes, pid_t launcher,
							      uint16_t master_port)
{
	int per_node = nnodes > 0 && ranks >= nnodes ? ranks / nnodes : 1;
	int node = node_of(rank, ranks, nnodes);
	auto s = [](long v) { return std::to_string(v); };
	return {
		{"RANK", s(rank)},
		{"WORLD_SIZE", s(ranks)},
		{"LOCAL_RANK", s(rank % per_node)},
		{"LOCAL_WORLD_SIZE", s(per_node)},
		{"GROUP_RANK", s(node)},
		{"NODE_RANK", s(node)},
		{"GROUP_WORLD_SIZE", s(nnodes)},
		{"ROLE_RANK", s(rank)},
		{"ROLE_WORLD_SIZE", s(ranks)},
		{"ROLE_NAME", "default"},
		{"TORCHELASTIC_RUN_ID", "trainsim-" + s(launcher)},
		{"TORCHELASTIC_RESTART_COUNT", "0"},
		{"TORCHELASTIC_MAX_RESTARTS", "0"},
		{"MASTER_ADDR", "127.0.0.1"},
		{"MASTER_PORT", s(master_port)},
	};
}

std::string environ_block(const std::vector<std::string> &env)
{
	std::string block;
	for (const auto &kv : env) {
		block += kv;
		block.push_back('\0');
	}
	return block;
}

bool export_launcher_env(const std::vector<std::pair<std::string, std::string>> &vars, int rank)
{
	for (const auto &[name, value] : vars)
		setenv(name.c_str(), value.c_str(), 1);
	std::vector<std::string> env;
	for (char **e = environ; e && *e; e++)
		env.emplace_back(*e);
	// On the heap, and never freed (not even when the move fails: a bound
	// may have moved): the kernel reads it whenever /proc/PID/environ is
	// read, for as long as the process (or a forked child, at the same
	// address) lives. Its terminating NUL keeps env_end inside the
	// allocation.
	auto *block = new std::string(environ_block(env));
	auto start = reinterpret_cast<unsigned long>(block->data());
	int e = move_env(start, start + block->size());
	if (e == 0)
		return true;
	fprintf(stderr, "trainsim: rank %d: cannot expose its launcher variables in /proc/PID/environ: %s\n", rank,
		strerror(e));
	return false;
}

} // namespace trainsim
