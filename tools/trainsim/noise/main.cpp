// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// trainsim-noise: a noisy neighbour that is not part of the training job.
// Starts N CPU hogs per CPU, each pinned to its CPU, until --duration
// passes or SIGTERM/SIGINT arrives. Start it separately from trainsim when
// the tracer must not see it in the job's process tree at all.
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

volatile sig_atomic_t g_stop = 0;

void on_signal(int)
{
	g_stop = 1;
}

double now_s()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

[[noreturn]] void hog(int cpu, double deadline)
{
	prctl(PR_SET_NAME, "trainsim-hog");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		fprintf(stderr, "trainsim-noise: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
	volatile unsigned long x = 0;
	while (now_s() < deadline)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ul + 1442695040888963407ul;
	_exit(0);
}

} // namespace

int main(int argc, char **argv)
{
	CLI::App app{"trainsim-noise: pinned CPU hogs (a noisy neighbour outside the job)"};
	int per_cpu = 1;
	std::vector<int> cpus;
	double duration = 60;
	app.add_option("--per-cpu", per_cpu, "hogs per CPU")->check(CLI::Range(1, 64));
	app.add_option("--cpus", cpus, "CPUs to load (default: every online CPU)")->delimiter(',');
	app.add_option("--duration", duration, "seconds before the hogs stop on their own")
		->check(CLI::PositiveNumber);
	CLI11_PARSE(app, argc, argv);

	prctl(PR_SET_NAME, "trainsim-noise");
	if (cpus.empty()) {
		cpu_set_t set;
		sched_getaffinity(0, sizeof(set), &set);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				cpus.push_back(c);
	}
	struct sigaction sa{};
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGINT, &sa, nullptr);
	double deadline = now_s() + duration;
	std::vector<pid_t> kids;
	for (int c : cpus)
		for (int i = 0; i < per_cpu; i++) {
			pid_t p = fork();
			if (p == 0)
				hog(c, deadline);
			if (p > 0)
				kids.push_back(p);
		}
	fprintf(stderr, "trainsim-noise: pid %d, %zu hogs\n", getpid(), kids.size());
	size_t alive = kids.size();
	while (alive > 0) {
		if (g_stop) {
			for (pid_t p : kids)
				kill(p, SIGKILL);
		}
		pid_t r = waitpid(-1, nullptr, 0);
		if (r > 0)
			alive--;
		else if (errno == ECHILD)
			break;
	}
	return 0;
}
