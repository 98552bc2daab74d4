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
