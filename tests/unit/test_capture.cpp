// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>
#include <fmt/core.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "capture/capture_file.h"
#include "steptrace_abi.h"

using namespace steptrace;

namespace {
std::string tmp_path(const char* name) {
  return std::string("/tmp/steptrace-test-") + std::to_string(getpid()) + "-" + name;
}
std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void spit(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
std::string write_sample(const char* name, int n) {
  auto p = tmp_path(name);
  unlink(p.c_str());
  auto w = CaptureWriter::create(p, {{"host", "test"}});
  REQUIRE(w.ok());
  for (int i = 0; i < n; ++i) {
    st_sched_wakeup e{};
    e.hdr.size = sizeof(e);
    e.hdr.kind = ST_EV_SCHED_WAKEUP;
    e.hdr.ts_ns = static_cast<uint64_t>(i);
    REQUIRE((*w)->append(&e, sizeof(e)).ok());
  }
  DropStats d;
  d.emitted[ST_EV_SCHED_WAKEUP] = static_cast<uint64_t>(n) + 5;
  d.dropped[ST_EV_SCHED_WAKEUP] = 5;
  REQUIRE((*w)->close(d, 1234).ok());
  return p;
}
}  // namespace

TEST_CASE("capture: round trip keeps every record, the metadata and the drop counters", "[capture]") {
  auto p = write_sample("rt", 50000);  // more than one 1 MiB chunk
  struct stat st {};
  REQUIRE(stat(p.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  uint64_t n = 0, last = 0;
  bool ordered = true;
  auto c = read_capture(p, [&](const void* d, size_t len) {
    REQUIRE(len == sizeof(st_sched_wakeup));
    st_sched_wakeup e;
    std::memcpy(&e, d, sizeof(e));
    if (n > 0 && e.hdr.ts_ns != last + 1) ordered = false;
    last = e.hdr.ts_ns;
    ++n;
  });
  REQUIRE(c.ok());
  CHECK(n == 50000);
  CHECK(ordered);
  CHECK(c->records == 50000);
  CHECK(c->meta["host"] == "test");
  CHECK(c->drops.dropped[ST_EV_SCHED_WAKEUP] == 5);
  CHECK(c->trailer["window_end_ns"] == 1234);
  CHECK_FALSE(c->truncated);
  unlink(p.c_str());
}

TEST_CASE("capture: an existing file or a planted symlink is never overwritten", "[capture]") {
  auto p = tmp_path("sym");
  unlink(p.c_str());
  unlink((p + ".tmp").c_str());
  REQUIRE(symlink("/tmp/steptrace-should-not-exist", (p + ".tmp").c_str()) == 0);
  auto w = CaptureWriter::create(p, {});
  CHECK_FALSE(w.ok());
  unlink((p + ".tmp").c_str());
  CHECK(access("/tmp/steptrace-should-not-exist", F_OK) != 0);
}

TEST_CASE("capture: corrupt, foreign, newer and truncated files get a clear error", "[capture]") {
  auto p = write_sample("bad", 1000);
  auto good = slurp(p);
  auto sink = [](const void*, size_t) {};
  auto q = tmp_path("bad2");

  spit(q, {'h', 'e', 'l', 'l', 'o'});
  auto r = read_capture(q, sink);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("not a steptrace capture") != std::string::npos);

  auto newer = good;
  newer[8] = 99;
  spit(q, newer);
  r = read_capture(q, sink);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("newer") != std::string::npos);

  auto flipped = good;
  flipped[good.size() / 2] ^= 0xff;  // inside the compressed chunk
  spit(q, flipped);
  r = read_capture(q, sink);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("offset") != std::string::npos);

  // Cut inside the chunk (200 bytes before the trailer): a readable (empty)
  // prefix, marked truncated, no crash.
  std::string as_text(good.begin(), good.end());
  size_t trailer = as_text.rfind("STTR");
  REQUIRE(trailer != std::string::npos);
  REQUIRE(trailer > 200);
  std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(trailer - 200));
  spit(q, cut);
  r = read_capture(q, sink);
  REQUIRE(r.ok());
  CHECK(r->truncated);

  // Every prefix of a valid file either parses or fails cleanly.
  for (size_t len = 0; len < good.size(); len += 7) {
    auto rr = read_capture_bytes(good.data(), len, sink);
    if (rr.ok()) CHECK(rr->truncated);
  }
  unlink(p.c_str());
  unlink(q.c_str());
}

namespace {

// Incompressible records (xorshift bytes): a 1 MiB chunk stays ~1 MiB on disk.
struct NoiseRecord {
  st_event_header hdr{};
  uint8_t payload[232];
};

NoiseRecord noise(uint64_t& s, uint64_t ts) {
  NoiseRecord r;
  r.hdr.size = sizeof(r);
  r.hdr.kind = ST_EV_SCHED_WAKEUP;
  r.hdr.ts_ns = ts;
  for (auto& b : r.payload) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    b = static_cast<uint8_t>(s);
  }
  return r;
}

// A capture whose trailer is `trailer` verbatim (any JSON, any types).
std::vector<uint8_t> with_trailer(const std::vector<uint8_t>& capture, const std::string& trailer) {
  // The writer's trailer is the last section: "STTR" | u32 len | JSON.
  std::string s(capture.begin(), capture.end());
  size_t at = s.rfind("STTR");
  REQUIRE(at != std::string::npos);
  std::vector<uint8_t> out(capture.begin(), capture.begin() + static_cast<long>(at) + 4);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(trailer.size() >> (8 * i)));
  out.insert(out.end(), trailer.begin(), trailer.end());
  return out;
}

}  // namespace

TEST_CASE("capture: --max-size stops at the last chunk that fits, with a valid trailer under the cap", "[capture]") {
  auto p = tmp_path("cap");
  unlink(p.c_str());
  const uint64_t cap = 2'500'000;  // two ~1 MiB chunks fit, a third does not
  auto w = CaptureWriter::create(p, {{"host", "test"}}, {cap, false});
  REQUIRE(w.ok());
  uint64_t seed = 88172645463325252ull, appended = 0;
  Status st = Ok{};
  for (;;) {
    auto rec = noise(seed, appended);
    if (!(st = (*w)->append(&rec, sizeof(rec))).ok()) break;
    ++appended;
  }
  CHECK(st.error().message.find("reached --max-size 2500000 bytes") != std::string::npos);
  CHECK((*w)->stopped());
  CHECK((*w)->end_reason() == "max_size");
  // A chunk is flushed at 1 MiB of raw records: 4033 records of 4 + 256 bytes,
  // ~1 MB on disk each since they do not compress.
  const uint64_t written = (*w)->records_written();
  CHECK(written == 2 * 4033);
  CHECK(appended == 3 * 4033 - 1);  // the third chunk's last record was refused
  CHECK_FALSE((*w)->append(&seed, sizeof(seed)).ok());  // stays stopped
  REQUIRE((*w)->close(DropStats{}, 99).ok());

  struct stat sb {};
  REQUIRE(stat(p.c_str(), &sb) == 0);
  CHECK(static_cast<uint64_t>(sb.st_size) <= cap);
  CHECK(access((p + ".tmp").c_str(), F_OK) != 0);
  uint64_t n = 0;
  auto c = read_capture(p, [&](const void*, size_t len) {
    CHECK(len == sizeof(NoiseRecord));
    ++n;
  });
  REQUIRE(c.ok());
  CHECK_FALSE(c->truncated);
  CHECK(c->end == "max_size");
  CHECK(n == written);
  REQUIRE(c->trailer_records.has_value());
  CHECK(*c->trailer_records == written);
  CHECK(c->warnings.empty());
  unlink(p.c_str());

  // A cap below the header and the trailer's room is refused up front.
  auto tiny = CaptureWriter::create(p, {{"host", "test"}}, {1000, false});
  REQUIRE_FALSE(tiny.ok());
  CHECK(tiny.error().message.find("too small") != std::string::npos);
  CHECK(access((p + ".tmp").c_str(), F_OK) != 0);
}

TEST_CASE("capture: a failed write cuts the file at its last chunk, and close() still writes the trailer",
          "[capture]") {
  // RLIMIT_FSIZE makes writes past 1.5 MB fail with EFBIG, as a full disk fails
  // with ENOSPC (in a child, so the limit does not outlive it).
  auto p = tmp_path("efbig");
  unlink(p.c_str());
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {1'500'000, 1'500'000};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(210);
    auto w = CaptureWriter::create(p, {{"host", "test"}});
    if (!w) _exit(211);
    uint64_t seed = 2463534242ull;
    int i = 0;
    for (; i < 20000; ++i) {
      auto rec = noise(seed, static_cast<uint64_t>(i));
      if (!(*w)->append(&rec, sizeof(rec)).ok()) break;
    }
    if (i == 20000) _exit(212);  // never failed
    if ((*w)->end_reason() != "write_error: File too large") _exit(213);
    auto st = (*w)->close(DropStats{}, 7, "signal SIGHUP");  // the writer's own reason wins
    _exit(st.ok() ? static_cast<int>((*w)->records_written() % 200) : 214);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  INFO("child exit " << WEXITSTATUS(status));
  CHECK(WEXITSTATUS(status) < 200);
  CHECK(access((p + ".tmp").c_str(), F_OK) != 0);
  struct stat sb {};
  REQUIRE(stat(p.c_str(), &sb) == 0);
  CHECK(sb.st_size <= 1'500'000);
  uint64_t n = 0;
  auto c = read_capture(p, [&](const void*, size_t) { ++n; });
  REQUIRE(c.ok());
  CHECK_FALSE(c->truncated);
  CHECK(c->end == "write_error: File too large");
  CHECK(n > 0);  // the first chunk (~1 MiB) was written whole
  CHECK(n % 200 == static_cast<uint64_t>(WEXITSTATUS(status)));
  REQUIRE(c->trailer_records.has_value());
  CHECK(*c->trailer_records == n);
  unlink(p.c_str());
}

TEST_CASE("capture: an existing capture is refused unless overwrite, even one that appears while recording",
          "[capture]") {
  auto p = tmp_path("exist");
  unlink(p.c_str());
  spit(p, {'k', 'e', 'e', 'p'});
  auto w = CaptureWriter::create(p, {});
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == p + " already exists (--force overwrites it)");
  CHECK(slurp(p) == std::vector<uint8_t>{'k', 'e', 'e', 'p'});
  CHECK(access((p + ".tmp").c_str(), F_OK) != 0);

  auto f = CaptureWriter::create(p, {{"host", "forced"}}, {0, true});
  REQUIRE(f.ok());
  REQUIRE((*f)->close(DropStats{}, 1).ok());
  auto c = read_capture(p, [](const void*, size_t) {});
  REQUIRE(c.ok());
  CHECK(c->meta["host"] == "forced");
  CHECK(c->end == "complete");

  // Created while the path was free; a file appears before close(): kept, the capture stays at .tmp.
  unlink(p.c_str());
  auto late = CaptureWriter::create(p, {{"host", "late"}});
  REQUIRE(late.ok());
  spit(p, {'n', 'e', 'w'});
  auto st = (*late)->close(DropStats{}, 1);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("File exists") != std::string::npos);
  CHECK(slurp(p) == std::vector<uint8_t>{'n', 'e', 'w'});
  auto kept = read_capture(p + ".tmp", [](const void*, size_t) {});
  INFO((kept ? std::string("ok") : kept.error().message));
  CHECK(kept.ok());
  unlink(p.c_str());
  unlink((p + ".tmp").c_str());

  // A directory is refused even with overwrite.
  auto dir = CaptureWriter::create("/tmp", {}, {0, true});
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.error().message == "/tmp is a directory");
}

TEST_CASE("capture: the trailer's end reason and fields of the wrong type", "[capture]") {
  auto p = write_sample("end", 10);
  auto good = slurp(p);
  auto sink = [](const void*, size_t) {};
  auto c = read_capture(p, sink);
  REQUIRE(c.ok());
  CHECK(c->end == "complete");
  CHECK(c->trailer_records == std::optional<uint64_t>(10));

  // A capture from before the "end" field: reads as before, end empty.
  auto q = tmp_path("end2");
  spit(q, with_trailer(good, R"({"emitted":[0,1],"dropped":[0,0],"records":10,"window_end_ns":5})"));
  c = read_capture(q, sink);
  REQUIRE(c.ok());
  CHECK(c->end.empty());
  CHECK(c->window_end_ns == std::optional<uint64_t>(5));
  CHECK(c->warnings.empty());

  // Wrong types: ignored, one warning each, never an exception.
  spit(q, with_trailer(good, R"({"emitted":[0,1],"dropped":[0,0],"records":"ten","window_end_ns":-5,"end":7})"));
  c = read_capture(q, sink);
  REQUIRE(c.ok());
  CHECK(c->end.empty());
  CHECK_FALSE(c->trailer_records.has_value());
  CHECK_FALSE(c->window_end_ns.has_value());
  REQUIRE(c->warnings.size() == 3);
  CHECK(c->warnings[0] == "capture trailer: \"records\" is not an unsigned integer (string); ignored");
  unlink(p.c_str());
  unlink(q.c_str());
}

TEST_CASE("capture: metadata that is not an object is one clear error", "[capture]") {
  for (const auto& meta : {nlohmann::json::array({1, 2}), nlohmann::json("text"), nlohmann::json(3)}) {
    auto p = tmp_path("meta");
    unlink(p.c_str());
    auto w = CaptureWriter::create(p, meta);
    REQUIRE(w.ok());
    REQUIRE((*w)->close(DropStats{}, 1).ok());
    auto c = read_capture(p, [](const void*, size_t) {});
    REQUIRE_FALSE(c.ok());
    INFO(c.error().message);
    CHECK(c.error().message.find("corrupt capture at offset 20: metadata is a JSON ") != std::string::npos);
    CHECK(c.error().message.find(", not an object") != std::string::npos);
    CHECK(c.error().message.find('\n') == std::string::npos);
    unlink(p.c_str());
  }
}

TEST_CASE("capture: the reader streams: a 64 GiB sparse file is not allocated, only read up to its fault",
          "[capture]") {
  auto p = write_sample("sparse", 100);
  struct stat sb {};
  REQUIRE(stat(p.c_str(), &sb) == 0);
  REQUIRE(truncate(p.c_str(), 64ll << 30) == 0);  // zeros after the trailer, no blocks
  uint64_t n = 0;
  auto c = read_capture(p, [&](const void*, size_t) { ++n; });
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.find(fmt::format("offset {}: data after the trailer", sb.st_size)) != std::string::npos);
  CHECK(n == 100);  // the records were delivered as their chunk was read
  unlink(p.c_str());
}

TEST_CASE("capture: BPF-side losses round trip in the trailer, and a trailer without them reads as zero", "[capture]") {
  auto p = tmp_path("losses");
  unlink(p.c_str());
  {
    auto w = CaptureWriter::create(p, {{"host", "test"}});
    REQUIRE(w.ok());
    DropStats d;
    d.losses[ST_LOSS_FORK_TARGET] = 3;
    d.losses[ST_LOSS_SOCK_EVICTED] = 11;
    d.losses[ST_LOSS_PROG_MISSED] = 5;
    d.kretprobe = LossMeasure::not_measurable;
    REQUIRE((*w)->close(d, 1).ok());
  }
  auto sink = [](const void*, size_t) {};
  auto c = read_capture(p, sink);
  REQUIRE(c.ok());
  CHECK(c->trailer["losses"]["fork_target_full"] == 3);
  CHECK(c->drops.losses[ST_LOSS_FORK_TARGET] == 3);
  CHECK(c->drops.losses[ST_LOSS_SOCK_EVICTED] == 11);
  CHECK(c->drops.losses[ST_LOSS_BLOCK_RQ] == 0);
  CHECK(c->trailer["losses"]["prog_missed"] == 5);
  CHECK(c->drops.losses[ST_LOSS_PROG_MISSED] == 5);
  CHECK(c->drops.kretprobe == LossMeasure::not_measurable);
  CHECK(c->drops.incomplete());
  // Skipped hook runs are reported, never a reason for INCOMPLETE on their own.
  {
    DropStats only_missed;
    only_missed.losses[ST_LOSS_PROG_MISSED] = 7;
    CHECK_FALSE(only_missed.incomplete());
    CHECK(incomplete_reason(only_missed).empty());
  }

  // The same file with the trailer of an older steptrace (no losses): zeros.
  auto bytes = slurp(p);
  std::string text(bytes.begin(), bytes.end());
  size_t at = text.rfind("STTR");
  REQUIRE(at != std::string::npos);
  auto with_trailer = [&](const std::string& json) {
    std::vector<uint8_t> b(bytes.begin(), bytes.begin() + static_cast<long>(at) + 4);
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(json.size() >> (8 * i)));
    b.insert(b.end(), json.begin(), json.end());
    return b;
  };
  auto old = with_trailer(R"({"emitted":[0,5],"dropped":[0,2],"records":0,"window_end_ns":1})");
  auto r = read_capture_bytes(old.data(), old.size(), sink);
  REQUIRE(r.ok());
  CHECK(r->drops.dropped[1] == 2);
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) CHECK(r->drops.losses[k] == 0);
  CHECK(r->drops.kretprobe == LossMeasure::not_attached);
  // Kinds this build does not know are ignored; a wrong type is an error.
  auto newer = with_trailer(R"({"emitted":[],"dropped":[],"losses":{"block_rq_full":4,"from_the_future":9}})");
  r = read_capture_bytes(newer.data(), newer.size(), sink);
  REQUIRE(r.ok());
  CHECK(r->drops.losses[ST_LOSS_BLOCK_RQ] == 4);
  auto bad = with_trailer(R"({"emitted":[],"dropped":[],"losses":{"block_rq_full":-4}})");
  r = read_capture_bytes(bad.data(), bad.size(), sink);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("loss") != std::string::npos);
  unlink(p.c_str());
}

TEST_CASE("capture: the committed corpus capture (written before losses existed) reads with zero losses",
          "[capture]") {
  auto c = read_capture(std::string(CAPTURE_CORPUS_DIR) + "/ok-straggler.cap", [](const void*, size_t) {});
  REQUIRE(c.ok());
  REQUIRE_FALSE(c->trailer.is_null());
  CHECK_FALSE(c->trailer.contains("losses"));
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) CHECK(c->drops.losses[k] == 0);
}
