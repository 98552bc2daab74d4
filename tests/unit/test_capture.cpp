// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>
#include <sys/stat.h>
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
  REQUIRE((*w)->close(d, static_cast<uint64_t>(n), 1234).ok());
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

TEST_CASE("capture: BPF-side losses round trip in the trailer; a trailer without them reads as zero", "[capture]") {
  auto p = tmp_path("losses");
  unlink(p.c_str());
  {
    auto w = CaptureWriter::create(p, {{"host", "test"}});
    REQUIRE(w.ok());
    DropStats d;
    d.losses[ST_LOSS_FORK_TARGET] = 3;
    d.losses[ST_LOSS_SOCK_EVICTED] = 11;
    d.kretprobe = LossMeasure::not_measurable;
    REQUIRE((*w)->close(d, 0, 1).ok());
  }
  auto sink = [](const void*, size_t) {};
  auto c = read_capture(p, sink);
  REQUIRE(c.ok());
  CHECK(c->trailer["losses"]["fork_target_full"] == 3);
  CHECK(c->drops.losses[ST_LOSS_FORK_TARGET] == 3);
  CHECK(c->drops.losses[ST_LOSS_SOCK_EVICTED] == 11);
  CHECK(c->drops.losses[ST_LOSS_BLOCK_RQ] == 0);
  CHECK(c->drops.kretprobe == LossMeasure::not_measurable);
  CHECK(c->drops.incomplete());

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
