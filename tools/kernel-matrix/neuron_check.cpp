// SPDX-License-Identifier: Apache-2.0
// neuron_check - compares `steptrace run --json -` output with neuron_client's
// expectations ("NAME COUNT BYTES" lines). jq is not in the guest initramfs.
//
//   neuron_check SUMMARY_JSON EXPECT_FILE [ACCEL_TIER [ACCEL_TP_EVENTS]]
//   neuron_check --efa SUMMARY_JSON EXPECT_FILE      (uverbs_client's expectations)
//
// ACCEL_TIER: a substring the report's attach_tiers.accel must contain (the tier
// this run must have used); ACCEL_TP_EVENTS: how many neuron:* tracepoint events
// (events.accel_tp.emitted) the run must have recorded.
//
// Passes when every expected command is reported with exactly that count and
// byte total and no errors, the copy commands show CPU-spin duration, and no
// other accelerator ioctl is reported (the /dev/null decoy must be filtered).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

// The summary JSON of `steptrace run --json -`, tolerating anything printed
// before it; discarded when there is none.
nlohmann::json load_summary(const char* path) {
  std::ifstream jf(path);
  std::stringstream ss;
  ss << jf.rdbuf();
  std::string text = ss.str();
  auto brace = text.find('{');
  if (brace == std::string::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text.substr(brace), nullptr, false);
}

// --efa: every uverbs call uverbs_client expects, by name, count and bytes,
// summed over the processes and phases of job.efa_control_path, nothing else,
// and the tier that saw them.
int check_efa(const nlohmann::json& j, std::ifstream& ef) {
  std::map<std::string, std::pair<unsigned long long, unsigned long long>> got;  // name -> calls, bytes
  if (j.contains("job") && j["job"].contains("efa_control_path"))
    for (const auto& p : j["job"]["efa_control_path"])
      for (const char* ph : {"setup", "in_steps", "teardown"})
        for (const auto& v : p[ph]["verbs"]) {
          auto& g = got[v["name"].get<std::string>()];
          g.first += v["calls"].get<unsigned long long>();
          g.second += v["bytes"].get<unsigned long long>();
        }
  int fails = 0;
  std::string name;
  unsigned long long count, bytes;
  std::set<std::string> expected;
  while (ef >> name >> count >> bytes) {
    expected.insert(name);
    auto g = got[name];
    bool ok = g.first == count && g.second == bytes;
    std::printf("neuron_check: %s uverbs %-16s calls %llu/%llu bytes %llu/%llu\n", ok ? "ok  " : "FAIL", name.c_str(),
                g.first, count, g.second, bytes);
    fails += !ok;
  }
  for (const auto& [n, g] : got)
    if (!expected.count(n) && g.first) {
      std::printf("neuron_check: FAIL unexpected uverbs %s x%llu (filtering by the uverbs major broken?)\n", n.c_str(),
                  g.first);
      ++fails;
    }
  std::string tier = j.contains("attach_tiers") ? j["attach_tiers"].value("efa_ctl", std::string()) : "";
  bool tier_ok = tier.find("uverbs") != std::string::npos && tier.find("none") == std::string::npos;
  std::printf("neuron_check: %s efa_ctl tier \"%s\"\n", tier_ok ? "ok  " : "FAIL", tier.c_str());
  fails += !tier_ok || expected.empty();
  std::printf("neuron_check: %s\n", fails ? "FAIL" : "PASS");
  return fails ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--efa") {
    std::ifstream ef(argv[3]);
    nlohmann::json j = load_summary(argv[2]);
    if (j.is_discarded()) {
      std::printf("neuron_check: FAIL no JSON in %s\n", argv[2]);
      return 1;
    }
    return check_efa(j, ef);
  }
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: neuron_check SUMMARY_JSON EXPECT_FILE [ACCEL_TIER [ACCEL_TP_EVENTS]]\n");
    return 2;
  }
  std::ifstream ef(argv[2]);
  nlohmann::json j = load_summary(argv[1]);
  if (j.is_discarded() || !j.contains("accel_ioctls")) {
    std::printf("neuron_check: FAIL unparsable summary or no accel_ioctls\n");
    return 1;
  }
  std::map<std::string, nlohmann::json> got;
  for (const auto& e : j["accel_ioctls"]) got[e["name"].get<std::string>()] = e;

  int fails = 0;
  std::string name;
  unsigned long long count, bytes;
  std::set<std::string> expected;
  while (ef >> name >> count >> bytes) {
    expected.insert(name);
    auto it = got.find(name);
    if (it == got.end()) {
      std::printf("neuron_check: FAIL %s not reported (expected count %llu)\n", name.c_str(), count);
      ++fails;
      continue;
    }
    const auto& e = it->second;
    auto c = e["count"].get<unsigned long long>(), b = e["bytes"].get<unsigned long long>();
    auto errs = e["errors"].get<unsigned long long>(), ns = e["total_ns"].get<unsigned long long>();
    bool ok = c == count && b == bytes && errs == 0;
    // Copies spin about 1 us per KiB in the mock driver: demand at least a quarter of that.
    if (bytes >= 64 * 1024 && ns < bytes / 1024 * 250) ok = false;
    std::printf("neuron_check: %s %-22s count %llu/%llu bytes %llu/%llu errors %llu total_ns %llu\n",
                ok ? "ok  " : "FAIL", name.c_str(), c, count, b, bytes, errs, ns);
    fails += !ok;
  }
  for (const auto& [n, e] : got) {
    if (expected.count(n)) continue;
    std::printf("neuron_check: FAIL unexpected %s count %llu (filtering by device major broken?)\n", n.c_str(),
                e["count"].get<unsigned long long>());
    ++fails;
  }
  if (expected.empty()) {
    std::printf("neuron_check: FAIL empty expectation file\n");
    ++fails;
  }
  if (argc >= 4) {
    std::string tier = j["attach_tiers"].value("accel", std::string());
    bool ok = tier.find(argv[3]) != std::string::npos;
    std::printf("neuron_check: %s accel tier \"%s\" (want \"%s\")\n", ok ? "ok  " : "FAIL", tier.c_str(), argv[3]);
    fails += !ok;
  }
  if (argc >= 5) {
    unsigned long long want = std::stoull(argv[4]), got_tp = 0;
    if (j.contains("events") && j["events"].contains("accel_tp"))
      got_tp = j["events"]["accel_tp"]["emitted"].get<unsigned long long>();
    bool ok = got_tp == want;
    std::printf("neuron_check: %s neuron:* tracepoint events %llu/%llu (%s)\n", ok ? "ok  " : "FAIL", got_tp, want,
                j["attach_tiers"].value("accel_tp", std::string("?")).c_str());
    fails += !ok;
  }
  if (j.value("incomplete", false)) std::printf("neuron_check: note: report marked incomplete\n");
  std::printf("neuron_check: %s\n", fails ? "FAIL" : "PASS");
  return fails ? 1 : 0;
}
