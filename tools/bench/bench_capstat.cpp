// SPDX-License-Identifier: Apache-2.0
// bench-capstat: count the records of a steptrace capture file by kind, and
// those that steptrace itself caused (B10): a switch to or from one of its
// threads, a wakeup it performed, or a record whose subject is steptrace.
//
//   bench-capstat FILE --self PID      -> one JSON object on stdout
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "capture/capture_file.h"
#include "steptrace_abi.h"

using namespace steptrace;

int main(int argc, char** argv) {
  if (argc != 4 || std::strcmp(argv[2], "--self") != 0) {
    std::fprintf(stderr, "usage: bench-capstat FILE --self PID\n");
    return 2;
  }
  const uint32_t self = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  uint64_t by_kind[ST_EV_KIND_MAX] = {};
  uint64_t self_kind[ST_EV_KIND_MAX] = {};
  uint64_t total = 0, self_total = 0, short_records = 0;
  auto r = read_capture(argv[1], [&](const void* d, size_t n) {
    ++total;
    if (n < sizeof(st_event_header)) {
      ++short_records;
      return;
    }
    st_event_header h;
    std::memcpy(&h, d, sizeof(h));
    uint32_t k = h.kind < ST_EV_KIND_MAX ? h.kind : 0;
    ++by_kind[k];
    bool mine = h.pid == self;
    if (h.kind == ST_EV_SCHED_SWITCH && n >= ST_SCHED_SWITCH_V1_SIZE) {  // v1 captures too
      st_sched_switch e{};
      std::memcpy(&e, d, std::min<size_t>(n, sizeof(e)));
      mine = mine || e.next_pid == self;
    } else if (h.kind == ST_EV_SCHED_WAKEUP && n >= sizeof(st_sched_wakeup)) {
      st_sched_wakeup e;
      std::memcpy(&e, d, sizeof(e));
      mine = mine || e.waker_pid == self;
    }
    if (mine) {
      ++self_kind[k];
      ++self_total;
    }
  });
  if (!r) {
    std::fprintf(stderr, "bench-capstat: %s\n", r.error().message.c_str());
    return 1;
  }
  nlohmann::json kinds = nlohmann::json::object(), mine = nlohmann::json::object();
  for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
    if (by_kind[k]) kinds[std::to_string(k)] = by_kind[k];
    if (self_kind[k]) mine[std::to_string(k)] = self_kind[k];
  }
  nlohmann::json j = {{"records", total},
                      {"self_records", self_total},
                      {"self_share", total ? double(self_total) / double(total) : 0.0},
                      {"by_kind", kinds},
                      {"self_by_kind", mine},
                      {"short_records", short_records},
                      {"truncated", r->truncated},
                      {"trailer_records", r->records}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
