// SPDX-License-Identifier: Apache-2.0
// Replays every file of the committed capture corpus (tests/corpus/capture)
// through read_capture_bytes and the decoder: real captures read fully,
// truncated ones keep a readable prefix or fail with an offset, corrupt ones
// fail with a reason naming the offset; nothing crashes.
#include <catch2/catch.hpp>
#include <dirent.h>

#include <fstream>
#include <iterator>

#include "capture/capture_file.h"
#include "decode/decoder.h"
#include "pipeline/replay.h"

using namespace steptrace;

namespace {

std::vector<std::string> corpus_files() {
  std::vector<std::string> v;
  DIR* d = opendir(CAPTURE_CORPUS_DIR);
  REQUIRE(d != nullptr);
  while (auto* e = readdir(d))
    if (e->d_name[0] != '.') v.push_back(e->d_name);
  closedir(d);
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint8_t> slurp(const std::string& name) {
  std::ifstream in(std::string(CAPTURE_CORPUS_DIR) + "/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("corpus: every capture in the corpus replays without crashing", "[capture][corpus]") {
  auto files = corpus_files();
  int ok = 0, trunc = 0, bad = 0;
  for (const auto& name : files) {
    INFO(name);
    auto bytes = slurp(name);
    Decoder dec;
    uint64_t n = 0, decoded = 0;
    auto r = read_capture_bytes(bytes.data(), bytes.size(), [&](const void* p, size_t len) {
      ++n;
      decoded += dec.decode(p, len).has_value();
    });
    if (name.rfind("ok-", 0) == 0) {
      ++ok;
      REQUIRE(r);
      CHECK(!r->truncated);
      CHECK(r->records == n);
      CHECK(n > 100);
      CHECK(decoded == n);
      CHECK(r->trailer.is_object());
    } else if (name.rfind("trunc-", 0) == 0) {
      ++trunc;
      // Cut short: either a readable prefix flagged as truncated, or an error at an offset.
      if (r) {
        CHECK(r->truncated);
        CHECK(r->records == n);
      } else {
        CHECK(r.error().message.find("offset") != std::string::npos);
      }
    } else if (name.rfind("bad-", 0) == 0) {
      ++bad;
      REQUIRE(!r);
      CHECK(r.error().message.find("offset") != std::string::npos);
    } else {
      // Fuzzer finds kept as regressions: must not crash; any outcome is fine.
      if (!r) CHECK(!r.error().message.empty());
    }
  }
  CHECK(ok >= 1);
  CHECK(trunc >= 2);
  CHECK(bad >= 3);
}

TEST_CASE("export: report --time and --steps analyse only that part of a capture", "[export]") {
  const std::string path = std::string(FIXTURE_DIR) + "/straggler.cap";
  auto whole = replay_capture(path);
  REQUIRE(whole.ok());
  REQUIRE(!whole->job.ranks.empty());
  TimeCut cut;
  cut.from_ns = 200'000'000;
  cut.to_ns = 500'000'000;
  auto part = replay_capture(path, {}, cut);
  REQUIRE(part.ok());
  CHECK(part->window_end_ns - part->window_start_ns <= 300'000'000);
  CHECK(part->records < whole->records);
  REQUIRE(!part->job.ranks.empty());
  for (const auto& rk : part->job.ranks)
    for (const auto& st : rk.steps) {
      CHECK(st.start_ns >= part->window_start_ns);
      CHECK(st.end_ns <= part->window_end_ns);
    }
  CHECK(part->job.ranks.front().steps.size() < whole->job.ranks.front().steps.size());
  // The steps' own times, absolute: the window is exactly theirs.
  const auto& s = whole->job.ranks.front().steps;
  REQUIRE(s.size() >= 6);
  TimeCut steps;
  steps.absolute = true;
  steps.from_ns = s[2].start_ns;
  steps.to_ns = s[5].end_ns;
  auto by_steps = replay_capture(path, {}, steps);
  REQUIRE(by_steps.ok());
  CHECK(by_steps->window_start_ns == s[2].start_ns);
  CHECK(by_steps->window_end_ns == s[5].end_ns);
  CHECK(by_steps->job.ranks.front().steps.size() >= 2);
}
