// SPDX-License-Identifier: Apache-2.0
// libFuzzer targets for every parser of external text (issue 8). One source,
// one binary per parser: build with -DFUZZ_<NAME> (tools/fuzz/run-parsers.sh).
// Each target also checks what the parser promises, not just that it returns.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#if defined(FUZZ_proc_devices) || defined(FUZZ_cgroup_procs)
#include "util/sys_root.h"
#endif
#if defined(FUZZ_cap_eff) || defined(FUZZ_lockdown)
#include "loader/preflight.h"
#endif
#if defined(FUZZ_kallsyms) || defined(FUZZ_tp_format)
#include "loader/kernel_text.h"
#endif
#if defined(FUZZ_maps)
#include "session/session.h"
#endif
#if defined(FUZZ_identity)
#include "util/proc_identity.h"
#endif
#if defined(FUZZ_cli)
#include "cli/options.h"
#endif

#define EXPECT(c) \
  do {            \
    if (!(c)) std::abort(); \
  } while (0)

using namespace steptrace;

#if defined(FUZZ_cli)
#include <cstdio>
// --help/--version print to stdout: keep the fuzzer's output readable.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!std::freopen("/dev/null", "w", stdout)) return 1;
  return 0;
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
#if defined(FUZZ_proc_devices)
  // /proc/devices: "Character devices:\n 10 misc\n239 neuron\n\nBlock devices:\n..."
  if (auto m = parse_proc_devices_char_major(text, "neuron")) EXPECT(text.find("neuron") != std::string::npos);
  (void)parse_proc_devices_char_major(text, "");
#elif defined(FUZZ_cgroup_procs)
  for (uint32_t pid : parse_pid_list(text)) EXPECT(pid != 0);
#elif defined(FUZZ_cap_eff)
  auto c = parse_cap_eff(text);
  if (c.bpf || c.perfmon || c.sys_admin) EXPECT(text.find("CapEff:") != std::string::npos);
#elif defined(FUZZ_lockdown)
  auto l = parse_lockdown(text);
  EXPECT(l.find(']') == std::string::npos);
  if (!l.empty()) EXPECT(text.find("[" + l + "]") != std::string::npos);
#elif defined(FUZZ_kallsyms)
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    auto e = parse_kallsyms_line(rest.substr(0, nl));
    if (e) EXPECT(!e->name.empty() && e->name.find_first_of(" \t\n") == std::string_view::npos);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  }
  (void)kallsyms_has(text, "ncdev_ioctl", "neuron");
  (void)kallsyms_has(text, "tcp_sendmsg");
#elif defined(FUZZ_tp_format)
  auto fields = parse_tp_format(text);
  for (const auto& f : fields) EXPECT(!f.name.empty() && text.find(f.name) != std::string::npos);
  for (const auto& tp : neuron_tracepoints()) (void)tp_layout_mismatch(fields, tp.fields);
#elif defined(FUZZ_maps)
  for (const auto& p : find_probe_libs(text)) {
    EXPECT(!p.empty() && p[0] == '/');
    EXPECT(p.find("libnrt.so") != std::string::npos || p.find("libsteptrace_marker.so") != std::string::npos);
  }
  for (const auto& m : find_mapped_probe_libs(text)) EXPECT(!m.path.empty() && m.path[0] == '/' && !m.range.empty());
#elif defined(FUZZ_identity)
  // environ (NUL-separated), then 0x01, then a /proc/PID/cgroup text.
  size_t cut = text.find('\x01');
  std::string env = text.substr(0, cut), cg = cut == std::string::npos ? "" : text.substr(cut + 1);
  auto id = parse_proc_identity(env, cg);
  const auto& c = id.container;
  EXPECT(c.container_id.empty() || c.container_id.size() >= 12);
  EXPECT(c.pod_uid.empty() || c.pod_uid.size() == 36);
  EXPECT(c.pod_uid.empty() || !c.pod_cgroup.empty());
  EXPECT(id.env.size() <= identity_env_keys().size());
  for (const auto& [k, v] : id.env) EXPECT(v.find('\x1b') == std::string::npos);
  (void)id.describe();
#elif defined(FUZZ_cli)
  // NUL-separated arguments after argv[0].
  std::vector<std::string> args{"steptrace"};
  size_t pos = 0;
  while (pos <= text.size() && args.size() < 64) {
    size_t z = text.find('\0', pos);
    args.push_back(text.substr(pos, z == std::string::npos ? std::string::npos : z - pos));
    if (z == std::string::npos) break;
    pos = z + 1;
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  int code = -1;
  auto o = parse_options(static_cast<int>(args.size()), argv.data(), &code);
  if (o) {
    // What validation promises: a launch has a command, sizes are in range.
    if (o->command == CommandKind::run) EXPECT(!o->argv.empty());
    EXPECT(o->ring_mib >= 1 && o->ring_mib <= 1024);
    EXPECT(o->drain_ms >= 1 && o->drain_ms <= 1000);
    EXPECT(o->ring_wake_pct <= 99);
  }
#else
#error "build with -DFUZZ_<target>"
#endif
  return 0;
}
