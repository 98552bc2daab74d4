// SPDX-License-Identifier: Apache-2.0
// Strings from the traced host (thread names, paths, environment labels) are
// whatever bytes a process chose: the kernel cuts a comm at 15 bytes, maybe
// mid-character, and any process may name itself 0xff or an escape sequence.
// They are made safe once, where they enter, so every sink (JSON, HTML,
// Perfetto, the terminal, Prometheus) gets valid UTF-8 with no control
// characters.
#pragma once

#include <string>
#include <string_view>

namespace steptrace {

// Valid UTF-8: each byte that does not start a well-formed sequence (overlong
// forms, surrogates and code points past U+10FFFF included) becomes U+FFFD.
std::string valid_utf8(std::string_view s);
// valid_utf8, and every C0/C1 control character and DEL written as \xNN (a
// backslash, then written as \\), so a name cannot move the cursor, change
// colours or retitle a terminal.
std::string host_string(std::string_view s);
// The longest prefix of s of at most max_bytes bytes that does not end inside
// a UTF-8 sequence (for columns and caps: a cut character is invalid UTF-8).
std::string_view utf8_prefix(std::string_view s, size_t max_bytes);

}  // namespace steptrace
