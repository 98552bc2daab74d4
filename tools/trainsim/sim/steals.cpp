// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/steals.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sim/clock.h"

namespace trainsim::steals {

namespace {

std::vector<std::string> split(const std::string &s, char sep)
{
	std::vector<std::string> out;
	std::stringstream ss(s);
	std::string item;
	while (std::getline(ss, item, sep))
		out.push_back(item);
	return out;
}

bool has_token(const std::string &list, const std::string &tok, char sep)
{
	for (const auto &t : split(list, sep))
		if (t == tok)
			return true;
	return false;
}

std::string join(const std::string &a, const std::string &b)
{
	if (a.empty() || a.back() != '/')
		return b.empty() || b.front() == '/' ? a + b : a + "/" + b;
	return b.front() == '/' ? a + b.substr(1) : a + b;
}

bool exists(const std::string &p)
{
	return access(p.c_str(), F_OK) == 0;
}

std::string tracefs_root()
{
	for (const char *p : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
		if (exists(std::string(p) + "/instances"))
			return p;
	return "";
}

void pin_self(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

} // namespace

std::string read_file(const std::string &path)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "";
	std::string out;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		out.append(buf, static_cast<size_t>(n));
	close(fd);
	return out;
}

bool write_file(const std::string &path, const std::string &text, std::string *err)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
		if (err)
			*err = "write '" + text + "' to " + path + ": " + strerror(errno);
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	return true;
}

std::map<std::string, int64_t> read_keyed(const std::string &path)
{
	std::map<std::string, int64_t> m;
	std::istringstream ss(read_file(path));
	std::string k;
	long long v;
	while (ss >> k >> v)
		m[k] = v;
	return m;
}

int64_t psi_total_ns(const std::string &pressure_file, const std::string &which)
{
	std::istringstream ss(read_file(pressure_file));
	std::string line;
	while (std::getline(ss, line)) {
		if (line.compare(0, which.size() + 1, which + " ") != 0)
			continue;
		size_t p = line.find("total=");
		if (p == std::string::npos)
			return -1;
		return std::strtoll(line.c_str() + p + 6, nullptr, 10) * 1000;
	}
	return -1;
}

std::string v2_mount(const std::string &proc_mounts)
{
	std::ifstream f(proc_mounts);
	std::string dev, mnt, type, opts;
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream ss(line);
		ss >> dev >> mnt >> type >> opts;
		if (type == "cgroup2")
			return mnt;
	}
	return "";
}

std::optional<Hierarchy> find_controller(const std::string &ctrl, std::string *why, const std::string &proc_mounts,
					 const std::string &proc_cgroup)
{
	// This process's path per hierarchy: "ID:controllers:path".
	std::map<std::string, std::string> v1_self; // controller -> path
	std::string v2_self;
	{
		std::ifstream f(proc_cgroup);
		std::string line;
		while (std::getline(f, line)) {
			size_t a = line.find(':'), b = line.find(':', a + 1);
			if (a == std::string::npos || b == std::string::npos)
				continue;
			std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
			if (line.compare(0, a, "0") == 0 && ctrls.empty())
				v2_self = path;
			for (const auto &c : split(ctrls, ','))
				v1_self[c] = path;
		}
	}
	std::string v2;
	std::ifstream f(proc_mounts);
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream ss(line);
		std::string dev, mnt, type, opts;
		ss >> dev >> mnt >> type >> opts;
		if (type == "cgroup" && has_token(opts, ctrl, ',')) {
			auto it = v1_self.find(ctrl);
			return Hierarchy{false, mnt, it != v1_self.end() ? it->second : "/"};
		}
		if (type == "cgroup2" && v2.empty())
			v2 = mnt;
	}
	if (!v2.empty()) {
		std::string ctrls = read_file(v2 + "/cgroup.controllers");
		while (!ctrls.empty() && (ctrls.back() == '\n' || ctrls.back() == ' '))
			ctrls.pop_back();
		if (has_token(ctrls, ctrl, ' '))
			return Hierarchy{true, v2, v2_self.empty() ? "/" : v2_self};
	}
	if (why)
		*why = "no cgroup hierarchy has the '" + ctrl + "' controller (no v1 mount with it in " + proc_mounts +
		       (v2.empty() ? ", no cgroup2 mount)" : ", and " + v2 + "/cgroup.controllers lacks it)");
	return std::nullopt;
}

bool make_dir(const std::string &dir, std::string *err)
{
	std::string cur;
	for (const auto &part : split(dir, '/')) {
		if (part.empty())
			continue;
		cur += "/" + part;
		if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
			if (err)
				*err = "mkdir " + cur + ": " + strerror(errno);
			return false;
		}
	}
	return true;
}

namespace {

// The cgroup a leftover task goes to: the nearest ancestor of `dir` that
// is a hierarchy root (v2) or simply the parent (v1, no internal-process
// rule there).
std::string evacuation_target(const std::string &dir)
{
	std::string parent = dir.substr(0, dir.rfind('/'));
	if (exists(dir + "/tasks")) // v1
		return parent;
	std::string p = parent;
	while (exists(p + "/cgroup.type")) // the v2 root has no cgroup.type
		p = p.substr(0, p.rfind('/'));
	return p;
}

} // namespace

bool remove_cgroup(const std::string &dir, bool recursive)
{
	if (!exists(dir))
		return true;
	if (recursive) {
		if (DIR *d = opendir(dir.c_str())) {
			std::vector<std::string> kids;
			while (dirent *e = readdir(d))
				if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
					kids.push_back(dir + "/" + e->d_name);
			closedir(d);
			for (const auto &k : kids)
				remove_cgroup(k, true);
		}
	}
	std::string target = evacuation_target(dir);
	bool v1 = exists(dir + "/tasks");
	for (int attempt = 0; attempt < 200; attempt++) {
		if (rmdir(dir.c_str()) == 0 || errno == ENOENT)
			return true;
		// Tasks still inside (a rank's loader on its way out after the
		// rank died): move them out, then try again.
		std::istringstream ss(read_file(dir + (v1 ? "/tasks" : "/cgroup.procs")));
		long id;
		while (ss >> id)
			write_file(target + (v1 ? "/tasks" : "/cgroup.procs"), std::to_string(id), nullptr);
		usleep(10000);
	}
	return rmdir(dir.c_str()) == 0;
}

// ---- cpu ------------------------------------------------------------------

namespace {

// v2: the groups of `name` under `mount`, from the root down with
// `controller` ("+cpu") enabled in each parent, so that no group with
// processes needs controllers for its children.
bool make_v2_path(const std::string &mount, const std::string &name, const std::string &controller, std::string *err)
{
	std::string cur = mount;
	if (!write_file(cur + "/cgroup.subtree_control", controller, err))
		return false;
	auto parts = split(name, '/');
	for (size_t i = 0; i < parts.size(); i++) {
		if (parts[i].empty())
			continue;
		cur += "/" + parts[i];
		if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
			*err = "mkdir " + cur + ": " + strerror(errno);
			return false;
		}
		if (i + 1 < parts.size() && !write_file(cur + "/cgroup.subtree_control", controller, err))
			return false;
	}
	return true;
}

} // namespace

std::optional<CpuCgroup> make_cpu_cgroup(const Hierarchy &h, const std::string &name, int64_t quota_us,
					 int64_t period_us, std::string *err)
{
	CpuCgroup cg;
	cg.v2 = h.v2;
	cg.quota_us = quota_us;
	cg.period_us = period_us;
	if (!h.v2) {
		cg.path = join(join(h.mount, h.self), name);
		if (!make_dir(cg.path, err) || !write_file(cg.path + "/cpu.cfs_period_us", std::to_string(period_us), err) ||
		    !write_file(cg.path + "/cpu.cfs_quota_us", std::to_string(quota_us), err))
			return std::nullopt;
		return cg;
	}
	// v2: from the root down, so that no group with processes needs
	// controllers for its children.
	cg.path = join(h.mount, name);
	if (!make_v2_path(h.mount, name, "+cpu", err))
		return std::nullopt;
	if (!write_file(cg.path + "/cpu.max", std::to_string(quota_us) + " " + std::to_string(period_us), err))
		return std::nullopt;
	return cg;
}

bool join_cpu_cgroup(const CpuCgroup &cg, std::string *err)
{
	if (cg.v2)
		return write_file(cg.path + "/cgroup.procs", std::to_string(getpid()), err);
	return write_file(cg.path + "/tasks", std::to_string(syscall(SYS_gettid)), err);
}

int64_t throttled_ns(const CpuCgroup &cg)
{
	if (!cg.v2) {
		auto m = read_keyed(cg.path + "/cpu.stat");
		auto it = m.find("throttled_time");
		return it == m.end() ? -1 : it->second;
	}
	std::string f = cg.path + "/cpu.stat.local";
	if (!exists(f))
		f = cg.path + "/cpu.stat";
	auto m = read_keyed(f);
	auto it = m.find("throttled_usec");
	return it == m.end() ? -1 : it->second * 1000;
}

// ---- memory -----------------------------------------------------------------

std::optional<LoaderMem> make_loader_mem(const Hierarchy &mem, const std::string &v2root, const std::string &name,
					 int64_t limit_bytes, int workers, std::string *err)
{
	LoaderMem m;
	m.mem_v2 = mem.v2;
	m.limit_bytes = limit_bytes;
	if (!mem.v2) {
		m.mem_path = join(join(mem.mount, mem.self), name);
		if (!make_dir(m.mem_path, err) ||
		    !write_file(m.mem_path + "/memory.limit_in_bytes", std::to_string(limit_bytes), err))
			return std::nullopt;
		if (v2root.empty()) {
			*err = "no cgroup2 mount for the loaders' PSI (memory.pressure)";
			return std::nullopt;
		}
		m.psi_path = join(v2root, name);
		if (!make_dir(m.psi_path, err))
			return std::nullopt;
	} else {
		m.mem_path = join(mem.mount, name);
		if (!make_v2_path(mem.mount, name, "+memory", err))
			return std::nullopt;
		if (!write_file(m.mem_path + "/memory.max", std::to_string(limit_bytes), err))
			return std::nullopt;
		m.psi_path = m.mem_path;
	}
	if (!exists(m.psi_path + "/memory.pressure")) {
		*err = m.psi_path + "/memory.pressure missing (PSI off? boot with psi=1)";
		return std::nullopt;
	}
	for (int w = 0; w < workers; w++) {
		m.psi_loader.push_back(m.psi_path + "/w" + std::to_string(w));
		if (!make_dir(m.psi_loader.back(), err))
			return std::nullopt;
	}
	return m;
}

bool join_loader_mem(const LoaderMem &m, int worker, std::string *err)
{
	std::string pid = std::to_string(getpid());
	if (!m.mem_v2 && !write_file(m.mem_path + "/cgroup.procs", pid, err))
		return false;
	if (worker >= 0 && worker < static_cast<int>(m.psi_loader.size()))
		return write_file(m.psi_loader[worker] + "/cgroup.procs", pid, err);
	return true;
}

std::map<std::string, int64_t> loader_mem_counters(const LoaderMem &m)
{
	std::map<std::string, int64_t> out;
	auto st = read_keyed(m.mem_path + "/memory.stat");
	const char *keys_v1[] = {"pgpgin", "pgpgout", "pgmajfault", "workingset_refault_file", "workingset_activate_file"};
	const char *keys_v2[] = {"pgscan",     "pgsteal", "pgscan_direct", "pgsteal_direct", "workingset_refault_file",
				 "pgmajfault", "workingset_activate_file"};
	if (!m.mem_v2) {
		for (const char *k : keys_v1)
			if (st.count(k))
				out[k] = st[k];
		std::string t = read_file(m.mem_path + "/memory.failcnt");
		if (!t.empty())
			out["failcnt"] = std::strtoll(t.c_str(), nullptr, 10);
	} else {
		for (const char *k : keys_v2)
			if (st.count(k))
				out[k] = st[k];
		for (const auto &[k, v] : read_keyed(m.mem_path + "/memory.events"))
			out["events_" + k] = v;
	}
	return out;
}

// ---- softirq ------------------------------------------------------------------

bool Rps::apply(int cpu, std::string *err)
{
	if (!exists(kRpsCpus)) {
		*err = std::string(kRpsCpus) + " missing (kernel without CONFIG_RPS?)";
		return false;
	}
	old = read_file(kRpsCpus);
	while (!old.empty() && (old.back() == '\n' || old.back() == ' '))
		old.pop_back();
	char mask[32];
	snprintf(mask, sizeof(mask), "%llx", 1ull << cpu);
	if (!write_file(kRpsCpus, mask, err))
		return false;
	set = true;
	return true;
}

void Rps::restore()
{
	if (set)
		write_file(kRpsCpus, old.empty() ? "0" : old, nullptr);
	set = false;
}

pid_t start_traffic(int cpu, double pps, int bytes, std::string *err)
{
	int sink = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int src = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	int rcvbuf = 8 << 20;
	if (sink < 0 || src < 0 || setsockopt(sink, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0 ||
	    bind(sink, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 ||
	    getsockname(sink, reinterpret_cast<sockaddr *>(&a), &len) != 0 ||
	    connect(src, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
		*err = std::string("softirq traffic sockets: ") + strerror(errno);
		if (sink >= 0)
			close(sink);
		if (src >= 0)
			close(src);
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		*err = std::string("fork traffic: ") + strerror(errno);
		close(sink);
		close(src);
		return -1;
	}
	if (pid > 0) {
		close(sink);
		close(src);
		return pid;
	}
	prctl(PR_SET_NAME, "trainsim-net");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	pin_self(cpu);
	fcntl(sink, F_SETFL, O_NONBLOCK);
	std::vector<char> payload(static_cast<size_t>(std::max(1, bytes)), 'x');
	char rbuf[65536];
	double per_ms = pps / 1000.0, owed = 0;
	timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		owed += per_ms;
		while (owed >= 1.0) {
			send(src, payload.data(), payload.size(), MSG_DONTWAIT);
			owed -= 1.0;
		}
		while (recv(sink, rbuf, sizeof(rbuf), MSG_DONTWAIT) > 0) {
		}
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
	}
}

void stop_traffic(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, nullptr, 0);
	}
}

bool parse_softirq_line(const std::string &line, int *pid, int *cpu, int64_t *ts_ns, bool *entry)
{
	size_t ev = line.find(": softirq_");
	if (ev == std::string::npos)
		return false;
	*entry = line.compare(ev + 10, 5, "entry") == 0;
	if (!*entry && line.compare(ev + 10, 4, "exit") != 0)
		return false;
	// The timestamp is the token right before ": softirq_".
	size_t ts_start = line.rfind(' ', ev);
	if (ts_start == std::string::npos)
		return false;
	std::string ts = line.substr(ts_start + 1, ev - ts_start - 1);
	size_t dot = ts.find('.');
	if (dot == std::string::npos)
		return false;
	int64_t sec = std::strtoll(ts.c_str(), nullptr, 10);
	std::string frac = ts.substr(dot + 1);
	int64_t f = std::strtoll(frac.c_str(), nullptr, 10);
	for (size_t i = frac.size(); i < 9; i++)
		f *= 10;
	*ts_ns = sec * 1000000000 + f;
	// "comm-PID  [CPU] flags": the last "[digits]" before the timestamp.
	size_t br = line.rfind('[', ts_start);
	while (br != std::string::npos && br > 0) {
		size_t close_br = line.find(']', br);
		bool digits = close_br != std::string::npos && close_br > br + 1;
		for (size_t i = br + 1; digits && i < close_br; i++)
			digits = isdigit(static_cast<unsigned char>(line[i]));
		if (digits)
			break;
		br = line.rfind('[', br - 1);
	}
	if (br == std::string::npos || br == 0)
		return false;
	*cpu = static_cast<int>(std::strtol(line.c_str() + br + 1, nullptr, 10));
	size_t e = br;
	while (e > 0 && line[e - 1] == ' ')
		e--;
	size_t s = e;
	while (s > 0 && isdigit(static_cast<unsigned char>(line[s - 1])))
		s--;
	if (s == e || s == 0 || line[s - 1] != '-')
		return false;
	*pid = static_cast<int>(std::strtol(line.c_str() + s, nullptr, 10));
	return true;
}

bool SoftirqTrace::start(const std::string &instance_name, int cpu, int reader_cpu, std::string *err)
{
	std::string root = tracefs_root();
	if (root.empty()) {
		*err = "tracefs not mounted (/sys/kernel/tracing/instances missing)";
		return false;
	}
	if (!exists(root + "/events/irq/softirq_entry")) {
		*err = root + "/events/irq/softirq_entry missing";
		return false;
	}
	dir_ = root + "/instances/" + instance_name;
	if (mkdir(dir_.c_str(), 0755) != 0) {
		*err = "mkdir " + dir_ + ": " + strerror(errno);
		dir_.clear();
		return false;
	}
	char mask[32];
	snprintf(mask, sizeof(mask), "%llx", 1ull << cpu);
	bool ok = write_file(dir_ + "/tracing_on", "0", err) && write_file(dir_ + "/trace_clock", "mono", err) &&
		  write_file(dir_ + "/tracing_cpumask", mask, err) && write_file(dir_ + "/buffer_size_kb", "8192", err);
	for (const char *e : {"softirq_entry", "softirq_exit"}) {
		std::string d = dir_ + "/events/irq/" + e;
		ok = ok && write_file(d + "/filter", "vec == 3", err) && write_file(d + "/enable", "1", err);
	}
	ok = ok && write_file(dir_ + "/tracing_on", "1", err);
	if (ok) {
		fd_ = open((dir_ + "/trace_pipe").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd_ < 0) {
			*err = "open " + dir_ + "/trace_pipe: " + strerror(errno);
			ok = false;
		}
	}
	if (!ok) {
		stop();
		return false;
	}
	stop_ = false;
	thread_ = std::thread([this, reader_cpu] { reader(reader_cpu); });
	return true;
}

void SoftirqTrace::reader(int reader_cpu)
{
	pin_self(reader_cpu);
	std::string pending;
	bool have_entry = false;
	int64_t entry_ts = 0;
	int entry_pid = 0;
	char buf[65536];
	auto consume = [&](const std::string &line) {
		int pid, cpu;
		int64_t ts;
		bool entry;
		if (line.find("LOST") != std::string::npos) {
			std::lock_guard<std::mutex> g(mu_);
			unmatched_++;
			have_entry = false;
			return;
		}
		if (!parse_softirq_line(line, &pid, &cpu, &ts, &entry))
			return;
		if (entry) {
			if (have_entry) {
				std::lock_guard<std::mutex> g(mu_);
				unmatched_++;
			}
			have_entry = true;
			entry_ts = ts;
			entry_pid = pid;
		} else if (have_entry) {
			have_entry = false;
			std::lock_guard<std::mutex> g(mu_);
			spans_.push_back(SoftirqSpan{entry_ts, std::max(ts, entry_ts), entry_pid});
		} else {
			std::lock_guard<std::mutex> g(mu_);
			unmatched_++;
		}
	};
	bool draining = false;
	for (;;) {
		pollfd p{fd_, POLLIN, 0};
		int pr = poll(&p, 1, 50);
		ssize_t n = pr > 0 ? read(fd_, buf, sizeof(buf)) : 0;
		if (n > 0) {
			pending.append(buf, static_cast<size_t>(n));
			size_t start = 0, nl;
			while ((nl = pending.find('\n', start)) != std::string::npos) {
				consume(pending.substr(start, nl - start));
				start = nl + 1;
			}
			pending.erase(0, start);
			continue;
		}
		// Nothing to read now: after stop() was asked, one more empty poll
		// means the buffer is drained.
		if (stop_.load()) {
			if (draining)
				break;
			draining = true;
		}
	}
}

void SoftirqTrace::stop()
{
	if (!dir_.empty())
		write_file(dir_ + "/tracing_on", "0", nullptr);
	stop_ = true;
	if (thread_.joinable())
		thread_.join();
	if (fd_ >= 0)
		close(fd_);
	fd_ = -1;
	if (!dir_.empty()) {
		for (const char *e : {"softirq_entry", "softirq_exit"})
			write_file(dir_ + "/events/irq/" + e + "/enable", "0", nullptr);
		rmdir(dir_.c_str());
		dir_.clear();
	}
}

std::vector<SoftirqSpan> SoftirqTrace::spans_of(int pid) const
{
	std::lock_guard<std::mutex> g(mu_);
	std::vector<SoftirqSpan> out;
	for (const auto &s : spans_)
		if (s.pid == pid)
			out.push_back(s);
	std::sort(out.begin(), out.end(), [](const SoftirqSpan &a, const SoftirqSpan &b) { return a.start_ns < b.start_ns; });
	return out;
}

int64_t overlap_ns(const std::vector<SoftirqSpan> &spans, int64_t a, int64_t b)
{
	auto it = std::lower_bound(spans.begin(), spans.end(), a,
				   [](const SoftirqSpan &s, int64_t t) { return s.end_ns <= t; });
	// spans are sorted by start and do not overlap, so also by end
	int64_t sum = 0;
	for (; it != spans.end() && it->start_ns < b; ++it) {
		int64_t lo = std::max(a, it->start_ns), hi = std::min(b, it->end_ns);
		if (hi > lo)
			sum += hi - lo;
	}
	return sum;
}

uint64_t burn_chunks(uint64_t chunks)
{
	static thread_local unsigned char scratch[16384];
	uint64_t h = 1469598103934665603ull;
	double acc = 1.0;
	for (uint64_t c = 0; c < chunks; c++) {
		for (size_t i = 0; i < sizeof(scratch); i++) {
			h = (h ^ scratch[i]) * 1099511628211ull;
			acc = acc * 1.0000001 + static_cast<double>(scratch[i] & 7);
		}
		scratch[c % sizeof(scratch)] = static_cast<unsigned char>(h);
	}
	uint64_t bits;
	memcpy(&bits, &acc, sizeof(bits));
	return h ^ bits;
}

double calibrate_chunks_per_ms()
{
	// The fastest of a few 20 ms runs: interrupts only slow a run down.
	double best = 0;
	volatile uint64_t sink = 0;
	for (int i = 0; i < 5; i++) {
		const uint64_t n = 64;
		int64_t t0 = thread_cpu_ns();
		uint64_t done = 0;
		while (thread_cpu_ns() - t0 < 20000000) {
			sink = sink + burn_chunks(n);
			done += n;
		}
		double ms = static_cast<double>(thread_cpu_ns() - t0) / 1e6;
		best = std::max(best, static_cast<double>(done) / ms);
	}
	return best;
}

} // namespace trainsim::steals
