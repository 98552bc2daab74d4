// SPDX-License-Identifier: Apache-2.0
// The stack sampler end to end (bpf/sample.bpf.c, session/symbol_worker.h,
// export/profile_view.h): a real CPython job's Python functions and the
// kernel's functions are named live, the capture carries the names so a
// replay shows the same folded stacks, and --sample-hz 0 records none.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/shell.h"
#include "support/workload.h"

namespace {

using steptrace::test::sh;
using steptrace::test::slurp;

const std::string kBin = STEPTRACE_BIN;

// Functions that burn CPU for 3 s: two in Python, one in the kernel (reading
// /dev/zero clears pages there).
constexpr const char* kBurn = R"(import time
class Model:
    def forward(self, n):
        s = 0
        for i in range(n):
            s += i * i
        return s
def preprocess(n):
    return sum(j % 7 for j in range(n))
def read_zero(f):
    return len(f.read(4 << 20))
end = time.time() + 3
m = Model()
z = open('/dev/zero', 'rb', buffering=0)
while time.time() < end:
    m.forward(100000)
    preprocess(25000)
    read_zero(z)
)";

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/st-stacks.XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Samples whose stack holds a frame that starts with `prefix` (and, when
// given, a later frame that starts with `then`), from a folded file.
uint64_t samples_with(const std::string& folded, const std::string& prefix, const std::string& then = "") {
  uint64_t n = 0;
  size_t pos = 0;
  while (pos < folded.size()) {
    size_t end = folded.find('\n', pos);
    if (end == std::string::npos) end = folded.size();
    const std::string line = folded.substr(pos, end - pos);
    pos = end + 1;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const size_t at = line.find(";" + prefix);
    if (at == std::string::npos) continue;
    if (then.empty() || line.find(";" + then, at) != std::string::npos) n += std::stoull(line.substr(sp + 1));
  }
  return n;
}

}  // namespace

TEST_CASE("stacks: a CPython job's functions are named live and in a replay of its capture", "[root][stacks][python]") {
  steptrace::test::require_root();
  TempDir d;
  {
    std::ofstream f(d.path + "/burn.py");
    f << kBurn;
  }
  const std::string cap = d.path + "/job.cap";
  auto r = sh(kBin + " record --sample-hz 199 -o " + cap + " --folded " + d.path + "/live.folded --json " + d.path +
              "/live.json -- /usr/bin/python3 " + d.path + "/burn.py");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const std::string live = slurp(d.path + "/live.folded");
  const std::string file = d.path + "/burn.py:";
  const uint64_t forward = samples_with(live, "Model.forward (" + file + "3)");
  const uint64_t pre = samples_with(live, "preprocess (" + file + "8)");
  const uint64_t gen = samples_with(live, "preprocess.<locals>.<genexpr> (" + file + "9)");
  const uint64_t zero = samples_with(live, "read_zero (" + file + "10)");
  INFO(live.substr(0, 4000));
  INFO("samples: forward " << forward << ", preprocess " << pre << ", its generator " << gen << ", read_zero " << zero);
  CHECK(forward >= 100);  // ~3 s at 199 Hz, most of it in forward
  CHECK(pre > 0);
  CHECK(gen > 0);         // a generator's frame, under preprocess
  CHECK(gen <= pre);
  CHECK(zero > 0);
  // Kernel frames are named where the kernel shows its symbols: read_zero's
  // time is in the kernel, under the read system call.
  if (slurp("/proc/sys/kernel/kptr_restrict").rfind("2", 0) != 0)
    CHECK(samples_with(live, "read_zero (" + file + "10)", "vfs_read_[k]") > 0);
  // The replay names the same frames from the capture's symbols notes.
  auto rep = sh(kBin + " report " + cap + " --folded " + d.path + "/replay.folded");
  INFO(rep.out);
  REQUIRE(rep.rc == 0);
  CHECK(slurp(d.path + "/replay.folded") == live);
  auto j = nlohmann::json::parse(slurp(d.path + "/live.json"));
  CHECK(j["cpu_profile"]["symbolized"] == true);
  CHECK(j["cpu_profile"]["samples"].get<uint64_t>() >= forward);
  CHECK(j["events"]["cpu_sample"]["dropped"] == 0);
}

TEST_CASE("stacks: a shell loop's samples are recorded with named kernel frames", "[root][stacks]") {
  // No Python, no debug files: what the sampler and kallsyms give on any
  // kernel (the qemu kernel matrix runs it on 6.1 and 6.12).
  steptrace::test::require_root();
  TempDir d;
  auto r = sh(kBin + " run --sample-hz 499 --json " + d.path + "/j.json --folded " + d.path +
              "/f.folded -- sh -c 'i=0; while [ $i -lt 30000 ]; do : > /dev/null; i=$((i+1)); done'");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(slurp(d.path + "/j.json"));
  CHECK(j["events"]["cpu_sample"]["emitted"].get<uint64_t>() > 0);
  CHECK(j["cpu_profile"]["samples"].get<uint64_t>() > 0);
  CHECK(j["attach_tiers"]["sample"].get<std::string>().find("perf_event cpu-clock 499 Hz") != std::string::npos);
  const std::string folded = slurp(d.path + "/f.folded");
  INFO(folded.substr(0, 3000));
  // Opening /dev/null 30000 times is kernel work: some frame is a named kernel function.
  bool named_kernel = false;
  for (size_t at = folded.find("_[k]"); at != std::string::npos && !named_kernel; at = folded.find("_[k]", at + 1)) {
    size_t b = folded.find_last_of("; ", at);
    const std::string frame = folded.substr(b + 1, at - b - 1);
    named_kernel = !frame.empty() && frame.rfind("0x", 0) != 0;
  }
  if (slurp("/proc/sys/kernel/kptr_restrict").rfind("2", 0) != 0) CHECK(named_kernel);
}

TEST_CASE("stacks: --sample-hz 0 samples nothing and says so in the tiers", "[root][stacks]") {
  steptrace::test::require_root();
  TempDir d;
  auto r = sh(kBin + " run --sample-hz 0 --json " + d.path + "/j.json -- sh -c 'i=0; while [ $i -lt 100000 ]; do "
              "i=$((i+1)); done'");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(slurp(d.path + "/j.json"));
  CHECK(j["cpu_profile"]["samples"] == 0);
  CHECK(j["events"]["cpu_sample"]["emitted"] == 0);
  CHECK(j["attach_tiers"]["sample"].get<std::string>().find("disabled") != std::string::npos);
}
