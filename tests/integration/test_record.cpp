// SPDX-License-Identifier: Apache-2.0
// `steptrace record` and `report` on the disk's bad days (issue 16): a full
// filesystem, --max-size, an existing output file, and captures whose
// metadata or trailer fields have the wrong JSON type.
#include <catch2/catch.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "capture/capture_file.h"
#include "support/shell.h"

using namespace steptrace;

namespace {

using steptrace::test::sh;
using steptrace::test::slurp;

const std::string kBin = STEPTRACE_BIN;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

int count_lines_starting(const std::string& s, const std::string& prefix) {
  int n = 0;
  for (size_t p = 0; p < s.size();) {
    size_t e = s.find('\n', p);
    if (s.compare(p, prefix.size(), prefix) == 0) ++n;
    if (e == std::string::npos) break;
    p = e + 1;
  }
  return n;
}


struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/steptrace-record.XXXXXX";
    REQUIRE(mkdtemp(t) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// A tmpfs of `size` mounted on a fresh directory, unmounted when the test ends.
struct SmallFs {
  TempDir dir;
  bool mounted = false;
  explicit SmallFs(const std::string& size) {
    mounted = ::mount("tmpfs", dir.path.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0700").c_str()) == 0;
    REQUIRE(mounted);
  }
  ~SmallFs() {
    if (mounted) ::umount2(dir.path.c_str(), MNT_DETACH);
  }
};

// The traced job: st-pingpong (a scheduler-event storm) started beside
// steptrace and attached with -p, so the job's fate is not steptrace's.
std::string record_pingpong(const std::string& args) {
  return fmt::format("({} 2000000000 & p=$!; {} record -p $p --collectors sched -d 30 {}; rc=$?; kill $p; "
                     "wait $p 2>/dev/null; exit $rc)",
                     PINGPONG_BIN, kBin, args);
}

struct Replayed {
  Result<CaptureContents> contents;
  uint64_t records = 0;         // every record in the file (the trailer counts these)
  uint64_t kernel_records = 0;  // of them, the kernel's (a report's "N records"; not the session's notes)
};

Replayed replay_file(const std::string& path) {
  Replayed r{make_error("unread"), 0, 0};
  r.contents = read_capture(path, [&](const void* d, size_t n) {
    ++r.records;
    st_event_header h{};
    if (n >= sizeof(h)) std::memcpy(&h, d, sizeof(h));
    if (n < sizeof(h) || h.kind != ST_EV_USER_NOTE) ++r.kernel_records;
  });
  return r;
}

}  // namespace

TEST_CASE("record: a full filesystem ends the recording with a valid truncated capture and an INCOMPLETE report",
          "[root][record]") {
  SmallFs fs("1m");
  const std::string cap = fs.dir.path + "/full.cap";
  auto r = sh(record_pingpong("-o " + cap));
  INFO(r.out);
  // One error line, the report still printed and INCOMPLETE with the reason, exit 1.
  CHECK(r.rc == 1);
  CHECK(count_lines_starting(r.out, "steptrace: error: ") == 1);
  CHECK(has(r.out, "No space left on device: recording stopped"));
  CHECK(has(r.out, "VERDICT"));
  CHECK(has(r.out, "INCOMPLETE: the capture ended early (write_error: No space left on device)"));
  CHECK(r.seconds < 25);  // the session ended on the error, not at -d 30
  std::printf("enospc: steptrace exited after %.1f s\n", r.seconds);

  // Renamed into place, cut at its last complete chunk, with a trailer saying why.
  CHECK(access((cap + ".tmp").c_str(), F_OK) != 0);
  struct stat sb {};
  REQUIRE(stat(cap.c_str(), &sb) == 0);
  auto rp = replay_file(cap);
  REQUIRE(rp.contents.ok());
  CHECK_FALSE(rp.contents->truncated);
  CHECK(rp.contents->end == "write_error: No space left on device");
  CHECK(rp.records > 0);
  REQUIRE(rp.contents->trailer_records.has_value());
  CHECK(*rp.contents->trailer_records == rp.records);
  std::printf("enospc: capture %lld bytes, %llu records\n", static_cast<long long>(sb.st_size),
              static_cast<unsigned long long>(rp.records));

  // `report` replays it: INCOMPLETE with the reason, in the text and the JSON.
  auto rep = sh(kBin + " report " + cap);
  INFO(rep.out);
  CHECK(rep.rc == 0);
  CHECK(has(rep.out, "INCOMPLETE: the capture ended early (write_error: No space left on device)"));
  CHECK(has(rep.out, fmt::format("{} records", rp.kernel_records)));
  auto js = sh(kBin + " report --json - " + cap);
  auto j = nlohmann::json::parse(js.out.substr(js.out.find('{')));
  CHECK(j["incomplete"] == true);
  CHECK(j["capture_end"] == "write_error: No space left on device");
  CHECK(j["job"]["verdict"]["incomplete"] == true);
}

TEST_CASE("record: --max-size stops with a valid capture under the cap", "[root][record]") {
  TempDir d;
  const std::string cap = d.path + "/capped.cap";
  auto r = sh(record_pingpong("--max-size 600k -o " + cap));
  INFO(r.out);
  CHECK(r.rc == 0);  // a cap the user set is not a failure
  CHECK(count_lines_starting(r.out, "steptrace: warning: capture ") == 1);
  CHECK(has(r.out, "reached --max-size 614400 bytes: recording stopped"));
  CHECK(has(r.out, "INCOMPLETE: the capture ended early (max_size)"));
  CHECK(r.seconds < 25);
  std::printf("max-size: steptrace exited after %.1f s\n", r.seconds);

  struct stat sb {};
  REQUIRE(stat(cap.c_str(), &sb) == 0);
  CHECK(sb.st_size <= 600 * 1024);
  auto rp = replay_file(cap);
  REQUIRE(rp.contents.ok());
  CHECK_FALSE(rp.contents->truncated);
  CHECK(rp.contents->end == "max_size");
  CHECK(rp.records > 0);
  CHECK(*rp.contents->trailer_records == rp.records);
  std::printf("max-size: capture %lld bytes (cap 614400), %llu records\n", static_cast<long long>(sb.st_size),
              static_cast<unsigned long long>(rp.records));
  auto rep = sh(kBin + " report " + cap);
  CHECK(rep.rc == 0);
  CHECK(has(rep.out, "INCOMPLETE: the capture ended early (max_size)"));
}

TEST_CASE("record: an existing capture is not overwritten without --force, and is with it", "[root][record]") {
  TempDir d;
  const std::string cap = d.path + "/exists.cap";
  { std::ofstream(cap) << "precious"; }
  auto r = sh(kBin + " record -o " + cap + " -d 1 -- true");
  CHECK(r.rc == 1);
  CHECK(r.out == "steptrace: error: " + cap + " already exists (--force overwrites it)\n");
  CHECK(slurp(cap) == "precious");
  CHECK(access((cap + ".tmp").c_str(), F_OK) != 0);

  r = sh(kBin + " record --force -o " + cap + " -d 1 -- true");
  INFO(r.out);
  CHECK(r.rc == 0);
  auto rp = replay_file(cap);
  REQUIRE(rp.contents.ok());
  CHECK(rp.contents->end == "complete");
  CHECK_FALSE(has(r.out, "INCOMPLETE: the capture"));

  r = sh(kBin + " record --max-size 12x -o " + cap + " -- true");
  CHECK(r.rc == 2);
  CHECK(has(r.out, "--max-size: invalid size '12x'"));
}

TEST_CASE("report: wrong-typed metadata is one clear line or a warning, never an abort", "[cli][capture]") {
  TempDir d;
  auto make = [&](const std::string& name, const nlohmann::json& meta, std::string_view end = kCaptureComplete) {
    std::string p = d.path + "/" + name;
    auto w = CaptureWriter::create(p, meta);
    REQUIRE(w.ok());
    REQUIRE((*w)->close(DropStats{}, 1000, end).ok());
    return p;
  };
  // Not an object: one line, exit 1.
  auto r = sh(kBin + " report " + make("array.cap", nlohmann::json::array({1, 2})));
  CHECK(r.rc == 1);
  CHECK(count_lines_starting(r.out, "steptrace: error: ") == 1);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK(has(r.out, "corrupt capture at offset 20: metadata is a JSON array, not an object"));

  // Fields of the wrong type: ignored with a warning each; the report is printed.
  nlohmann::json bad = {{"window_start_ns", "soon"}, {"ring_mib", -3}, {"drain_ms", 1e300},
                        {"attach_tiers", {1, 2}}};
  r = sh(kBin + " report " + make("types.cap", bad));
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(has(r.out, "VERDICT"));
  CHECK(has(r.out, "\"window_start_ns\" is not an unsigned integer"));
  CHECK(has(r.out, "\"ring_mib\" is not an unsigned integer"));
  CHECK(has(r.out, "\"drain_ms\" is not an unsigned integer"));
  CHECK(has(r.out, "\"attach_tiers\" is not an object (array); ignored"));

  // The trailer's end reason: INCOMPLETE + the reason in the text, JSON and HTML.
  auto cap = make("enospc.cap", {{"host", "t"}}, "write_error: No space left on device");
  r = sh(kBin + " report --html " + d.path + "/r.html " + cap);
  CHECK(r.rc == 0);
  CHECK(has(r.out, "[INCOMPLETE]"));
  CHECK(has(r.out, "INCOMPLETE: the capture ended early (write_error: No space left on device)"));
  CHECK(has(slurp(d.path + "/r.html"), "id=\"capture-end\">INCOMPLETE: the capture ended early (write_error"));
  r = sh(kBin + " report --json - " + cap);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["capture_end"] == "write_error: No space left on device");
  CHECK(j["incomplete"] == true);

  // A capture from before the trailer's "end" field reads as complete.
  r = sh(kBin + " report --json - " + std::string(FIXTURE_DIR) + "/straggler.cap");
  j = nlohmann::json::parse(r.out);
  CHECK(r.rc == 0);
  CHECK(j["incomplete"] == false);
  CHECK_FALSE(j.contains("capture_end"));
}

TEST_CASE("record: a hang-up (SIGHUP) closes the capture with a trailer that says so, INCOMPLETE, exit 1",
          "[root][record]") {
  TempDir d;
  const std::string cap = d.path + "/hup.cap";
  // An ssh session that goes away: SIGHUP to steptrace, 1.5 s into the recording.
  auto r = sh(fmt::format("({} 2000000000 & p=$!; {} record -p $p --collectors sched -d 30 -o {} & s=$!; "
                          "sleep 1.5; kill -HUP $s; wait $s; rc=$?; kill $p; wait $p 2>/dev/null; exit $rc)",
                          PINGPONG_BIN, kBin, cap));
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK(r.seconds < 20);
  CHECK(has(r.out, "tracing ended: signal SIGHUP"));
  CHECK(has(r.out, "INCOMPLETE: the capture ended early (signal SIGHUP)"));
  auto rp = replay_file(cap);
  REQUIRE(rp.contents.ok());
  CHECK_FALSE(rp.contents->truncated);  // the trailer was written
  CHECK(rp.contents->end == "signal SIGHUP");
  CHECK(rp.records > 0);
  CHECK(*rp.contents->trailer_records == rp.records);
  auto rep = sh(kBin + " report " + cap);
  CHECK(rep.rc == 0);
  CHECK(has(rep.out, "INCOMPLETE"));
  CHECK(has(rep.out, "signal SIGHUP"));
}

// Clock anchors (util/clock_anchor.h): a recording carries where its clock
// stood against the wall clock at the start, every 10 s and at the end, each
// with its bound, and the report says so - the footing for lining up several
// hosts' captures of one job.
TEST_CASE("record: a capture carries clock anchors from start to end, every 10 s, and the report states them",
          "[root][record]") {
  TempDir d;
  const std::string cap = d.path + "/clock.cap";
  const int64_t real_before = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count();
  auto r = sh(kBin + " record --collectors sched -o " + cap + " -- /bin/sleep 10.5");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const int64_t real_after = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch()).count();
  auto js = sh(kBin + " report --json - " + cap);
  REQUIRE(js.rc == 0);
  auto j = nlohmann::json::parse(js.out.substr(js.out.find('{')));
  const auto& c = j["source"]["clock"];
  INFO(c.dump());
  // Start, one 10 s in, end.
  CHECK(c["anchors"].get<int>() >= 3);
  CHECK(c["out_of_order"] == 0);
  CHECK(c["wall_clock_steps"].empty());
  CHECK(c["tightest_bound_ns"].get<int64_t>() >= 1);
  CHECK(c["widest_bound_ns"].get<int64_t>() < 1'000'000);
  const auto& first = c["first"];
  const auto& last = c["last"];
  CHECK(last["mono_ns"].get<uint64_t>() - first["mono_ns"].get<uint64_t>() >= 10'000'000'000ull);
  CHECK(first["real_ns"].get<int64_t>() >= real_before);
  CHECK(last["real_ns"].get<int64_t>() <= real_after);
  // The header's single offset is the first anchor's.
  CHECK(j["source"]["realtime_minus_monotonic_ns"].get<int64_t>() ==
        first["real_ns"].get<int64_t>() - first["mono_ns"].get<int64_t>());
  // The trace's own window lies between the first and the last anchor.
  CHECK(first["mono_ns"].get<uint64_t>() <= j["window"]["start_ns"].get<uint64_t>() + 1'000'000'000ull);
  auto text = sh(kBin + " report " + cap);
  INFO(text.out);
  CHECK(has(text.out, "wall clock: " + std::to_string(c["anchors"].get<int>()) + " anchors, each within +-"));
  CHECK(has(text.out, "not stepped"));
}
