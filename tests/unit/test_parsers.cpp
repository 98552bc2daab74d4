// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "loader/preflight.h"
#include "timeline/collector_stats.h"
#include "util/sys_root.h"

#include <algorithm>
#include <map>

using namespace steptrace;

TEST_CASE("parsers: /proc/devices char major by name", "[parsers]") {
  const char* text =
      "Character devices:\n  1 mem\n  4 /dev/vc/0\n239 neuron\n240 neuron_x\n\nBlock devices:\n 241 neuron\n";
  CHECK(parse_proc_devices_char_major(text, "neuron") == 239u);
  CHECK(parse_proc_devices_char_major(text, "mem") == 1u);
  CHECK_FALSE(parse_proc_devices_char_major(text, "nvme").has_value());
  CHECK_FALSE(parse_proc_devices_char_major("Block devices:\n 259 neuron\n", "neuron").has_value());
  CHECK_FALSE(parse_proc_devices_char_major("Character devices:\nxx neuron\n", "neuron").has_value());
  CHECK_FALSE(parse_proc_devices_char_major("", "neuron").has_value());
}

TEST_CASE("parsers: cgroup.procs pid lists", "[parsers]") {
  CHECK(parse_pid_list("1\n22\n333\n") == std::vector<uint32_t>{1, 22, 333});
  CHECK(parse_pid_list("12\nbad\n0\n\n7") == std::vector<uint32_t>{12, 7});
}

TEST_CASE("parsers: effective capabilities and lockdown", "[parsers]") {
  auto c = parse_cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n");
  CHECK(c.sys_admin);
  CHECK(c.bpf);
  CHECK(c.perfmon);
  c = parse_cap_eff("CapEff:\t0000000000000000\n");
  CHECK_FALSE(c.sys_admin);
  CHECK_FALSE(c.bpf);
  c = parse_cap_eff("CapEff:\t000000c000000000\n");  // CAP_BPF + CAP_PERFMON only
  CHECK(c.bpf);
  CHECK(c.perfmon);
  CHECK_FALSE(c.sys_admin);
  CHECK_FALSE(parse_cap_eff("CapEff:\tzz\n").bpf);
  CHECK(parse_lockdown("[none] integrity confidentiality\n") == "none");
  CHECK(parse_lockdown("none integrity [confidentiality]\n") == "confidentiality");
  CHECK(parse_lockdown("garbage") == "");
}

TEST_CASE("preflight: missing privileges or BTF fail with a hint", "[parsers]") {
  KernelFeatures f;
  f.kernel_major = 6;
  f.kernel_minor = 1;
  f.btf = true;
  f.ringbuf = f.task_storage = f.tp_sys_enter = true;
  Capabilities none;
  auto rows = run_preflight(f, none, "none");
  CHECK_FALSE(preflight_ok(rows));
  CHECK(format_preflight(rows).find("CAP_BPF") != std::string::npos);
  Capabilities root;
  root.sys_admin = true;
  CHECK(preflight_ok(run_preflight(f, root, "none")));
  f.btf = false;
  rows = run_preflight(f, root, "none");
  CHECK_FALSE(preflight_ok(rows));
  CHECK(format_preflight(rows).find("--btf") != std::string::npos);
  f.btf = true;
  CHECK_FALSE(preflight_ok(run_preflight(f, root, "confidentiality")));
}

TEST_CASE("format: socket tuples and Neuron command names", "[parsers]") {
  st_sock_tuple t{};
  t.saddr[10] = t.saddr[11] = t.daddr[10] = t.daddr[11] = 0xff;
  t.saddr[12] = 127;
  t.saddr[15] = 1;
  t.daddr[12] = 10;
  t.daddr[15] = 2;
  t.sport = 5000;
  t.dport = 80;
  CHECK(format_tuple(t) == "127.0.0.1:5000->10.0.0.2:80");
  CHECK(neuron_cmd_name(0xc0284e18) == "MEM_BUF_COPY64");
  CHECK(neuron_cmd_name(0x80084e23) == "DMA_QUEUE_COPY_START");
  CHECK(neuron_cmd_name(0x12345678) == "0x12345678");
  CHECK(format_dev((254u << 20) | 3) == "254:3");
}

TEST_CASE("parsers: /proc/PID/stat state, parent and group, with a comm full of spaces and parentheses",
          "[parsers]") {
  auto st = parse_proc_stat("4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 95 0 0 0 0 0 0 0 20 0 1 0");
  REQUIRE(st.has_value());
  CHECK(st->state == 'S');
  CHECK(st->ppid == 17);
  CHECK(st->pgrp == 4242);
  auto z = parse_proc_stat("7 (sh) Z 1 7 7");
  REQUIRE(z.has_value());
  CHECK(z->state == 'Z');
  CHECK_FALSE(parse_proc_stat("7 (sh) S x 7 7").has_value());
  CHECK_FALSE(parse_proc_stat("7 (sh").has_value());
  CHECK_FALSE(parse_proc_stat("").has_value());
}

TEST_CASE("parsers: descendants of a launcher, each once, roots left out", "[parsers]") {
  // 10 -> 11 -> 13, 10 -> 12; 20 is unrelated; a cycle 30 <-> 31 does not loop.
  std::map<uint32_t, uint32_t> parent{{10, 1}, {11, 10}, {12, 10}, {13, 11}, {20, 1}, {30, 31}, {31, 30}};
  auto d = descendants_in(parent, {10});
  std::sort(d.begin(), d.end());
  CHECK(d == std::vector<uint32_t>{11, 12, 13});
  CHECK(descendants_in(parent, {20}).empty());
  auto c = descendants_in(parent, {30});
  CHECK(c == std::vector<uint32_t>{31});
}
