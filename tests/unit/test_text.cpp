// SPDX-License-Identifier: Apache-2.0
// Strings from the traced host made safe for every sink (util/text.h).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "util/json_text.h"
#include "util/text.h"

using namespace steptrace;

TEST_CASE("text: invalid UTF-8 becomes U+FFFD, valid text is kept", "[text]") {
  CHECK(valid_utf8("python3") == "python3");
  CHECK(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(valid_utf8("\xff") == "\xef\xbf\xbd");
  // A comm cut at 15 bytes in the middle of a 3-byte character.
  CHECK(valid_utf8("ab\xe2\x82") == "ab\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(valid_utf8("\xc0\xaf") == "\xef\xbf\xbd\xef\xbf\xbd");        // overlong '/'
  CHECK(valid_utf8("\xed\xa0\x80") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
  CHECK(valid_utf8("\xf4\x90\x80\x80").find("\xef\xbf\xbd") == 0);   // past U+10FFFF
}

TEST_CASE("text: control characters from the host are written out, never sent to a terminal", "[text]") {
  CHECK(host_string("\x1b[31mred\x07") == "\\x1b[31mred\\x07");
  CHECK(host_string("tab\there") == "tab\\x09here");
  CHECK(host_string("\xc2\x9b" "2J") == "\\x9b2J");  // C1 CSI
  CHECK(host_string("a\\b") == "a\\\\b");
  CHECK(host_string("\x7f") == "\\x7f");
  CHECK(host_string("\xff\x1b") == "\xef\xbf\xbd\\x1b");
  CHECK(host_string("worker-0 \xc3\xa9") == "worker-0 \xc3\xa9");
}

TEST_CASE("text: JSON text never throws and stays valid UTF-8", "[text]") {
  nlohmann::json j = {{"comm", std::string("\xff\xfe")}};
  CHECK_THROWS(j.dump());  // what aborted an hour-long session before
  std::string out;
  REQUIRE_NOTHROW(out = json_text(j));
  CHECK(nlohmann::json::parse(out)["comm"] == "\xef\xbf\xbd\xef\xbf\xbd");
}
