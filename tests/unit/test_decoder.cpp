// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "decode/decoder.h"

using namespace steptrace;

namespace {
template <typename T>
std::vector<uint8_t> bytes_of(const T& v, size_t pad_to = 0) {
  std::vector<uint8_t> b(sizeof(T) + pad_to, 0);
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}
}  // namespace

TEST_CASE("decoder: a valid record decodes to its kind", "[decode]") {
  st_accel_ioctl a{};
  a.hdr.size = sizeof(a);
  a.hdr.kind = ST_EV_ACCEL_IOCTL;
  a.hdr.ts_ns = 42;
  a.cmd = 0xc0284e18;
  a.bytes = 4096;
  // The ring buffer pads records to 8 bytes: trailing padding is ignored.
  auto b = bytes_of(a, 8);
  Decoder d;
  auto e = d.decode(b.data(), b.size());
  REQUIRE(e.has_value());
  REQUIRE(std::holds_alternative<st_accel_ioctl>(*e));
  CHECK(std::get<st_accel_ioctl>(*e).bytes == 4096);
  CHECK(header_of(*e).ts_ns == 42);
  CHECK(d.stats().decoded[ST_EV_ACCEL_IOCTL] == 1);
}

TEST_CASE("decoder: unknown kinds and bad sizes are counted, not fatal", "[decode]") {
  Decoder d;
  st_event_header h{};
  h.size = sizeof(h);
  h.kind = 200;
  auto b = bytes_of(h);
  CHECK_FALSE(d.decode(b.data(), b.size()).has_value());
  CHECK(d.stats().unknown_kind == 1);

  st_sched_switch s{};
  s.hdr.size = sizeof(s) - 4;  // claims a wrong size for its kind (neither v1 nor v2)
  s.hdr.kind = ST_EV_SCHED_SWITCH;
  b = bytes_of(s);
  CHECK_FALSE(d.decode(b.data(), b.size() - 4).has_value());
  s.hdr.size = sizeof(s) + 100;  // larger than the buffer
  b = bytes_of(s);
  CHECK_FALSE(d.decode(b.data(), b.size()).has_value());
  CHECK_FALSE(d.decode(b.data(), 3).has_value());  // shorter than a header
  CHECK(d.stats().bad_size == 3);
  CHECK(d.stats().total_decoded() == 0);
}

TEST_CASE("decoder: every kind below ST_EV_KIND_MAX has a name", "[decode]") {
  for (uint32_t k = 1; k < ST_EV_KIND_MAX; ++k) CHECK(kind_name(k) != "unknown");
  CHECK(kind_name(ST_EV_KIND_MAX) == "unknown");
}

TEST_CASE("decoder: ABI v1 switch records (no queue wait) still decode, with the wait unknown", "[decode]") {
  st_sched_switch s{};
  s.hdr.size = ST_SCHED_SWITCH_V1_SIZE;
  s.hdr.kind = ST_EV_SCHED_SWITCH;
  s.next_tid = 77;
  s.prev_sys_nr = 16;
  s.prev_queue_ns = 12345;  // beyond the v1 record: must not be read
  auto b = bytes_of(s);
  Decoder d;
  auto e = d.decode(b.data(), ST_SCHED_SWITCH_V1_SIZE);
  REQUIRE(e.has_value());
  const auto& v = std::get<st_sched_switch>(*e);
  CHECK(v.next_tid == 77);
  CHECK(v.prev_sys_nr == 16);
  CHECK(v.prev_queue_ns == ST_QUEUE_UNKNOWN);
}
