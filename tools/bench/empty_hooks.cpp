// SPDX-License-Identifier: Apache-2.0
// bench-empty-hooks SET[,SET...]: attaches B0's empty programs
// (empty_hooks.bpf.c) on the hooks of the named collectors - sched, syscall,
// syscall-tp, syscall-tp-net, block, net - says "attached N" on stdout, and holds them until SIGINT or
// SIGTERM. bench.py runs a workload under it beside the same workload bare
// and traced, so each collector's cost is also stated over an empty program.
#include <bpf/libbpf.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_empty_hooks.skel.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// The collector a program stands in for, from its name (empty_<hook>).
const char* set_of(const char* prog) {
  std::string p = prog;
  if (p.rfind("empty_sched_", 0) == 0 || p == "empty_task_rename") return "sched";
  if (p.rfind("empty_sys_", 0) == 0) return "syscall";
  if (p.rfind("empty_tp_sys_", 0) == 0) return "syscall-tp";
  if (p.rfind("empty_tpn_sys_", 0) == 0) return "syscall-tp-net";
  if (p.rfind("empty_block_", 0) == 0) return "block";
  return "net";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: bench-empty-hooks SET[,SET...]   (sets: sched syscall syscall-tp syscall-tp-net block net)\n");
    return 2;
  }
  const std::string sets = std::string(",") + argv[1] + ",";
  auto want = [&](const char* set) { return sets.find(std::string(",") + set + ",") != std::string::npos; };
  bench_empty_hooks* skel = bench_empty_hooks__open();
  if (!skel) {
    std::fprintf(stderr, "bench-empty-hooks: cannot open the BPF object: %s\n", std::strerror(errno));
    return 1;
  }
  bpf_program* prog = nullptr;
  int chosen = 0;
  bpf_object__for_each_program(prog, skel->obj) {
    const bool on = want(set_of(bpf_program__name(prog)));
    bpf_program__set_autoload(prog, on);
    chosen += on;
  }
  if (chosen == 0) {
    std::fprintf(stderr, "bench-empty-hooks: no program in '%s'\n", argv[1]);
    bench_empty_hooks__destroy(skel);
    return 2;
  }
  if (int err = bench_empty_hooks__load(skel); err) {
    std::fprintf(stderr, "bench-empty-hooks: load failed: %s\n", std::strerror(-err));
    bench_empty_hooks__destroy(skel);
    return 1;
  }
  std::vector<bpf_link*> links;
  bpf_object__for_each_program(prog, skel->obj) {
    if (!bpf_program__autoload(prog)) continue;
    bpf_link* l = bpf_program__attach(prog);
    if (!l) {
      std::fprintf(stderr, "bench-empty-hooks: cannot attach %s: %s\n", bpf_program__name(prog), std::strerror(errno));
      for (auto* x : links) bpf_link__destroy(x);
      bench_empty_hooks__destroy(skel);
      return 1;
    }
    links.push_back(l);
  }
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  std::printf("attached %zu\n", links.size());
  std::fflush(stdout);
  while (!g_stop) ::pause();
  for (auto* x : links) bpf_link__destroy(x);
  bench_empty_hooks__destroy(skel);
  return 0;
}
