// SPDX-License-Identifier: Apache-2.0
// capgen: a long capture from a short one, for the long-session benchmarks.
// The input's records are written N times, each copy shifted in time by the
// input's length (and a gap of one typical record spacing), so the result is
// the same job running N times as long: the same processes and threads (their
// births and exec only in the first copy, their exits only in the last), the
// same sockets, the same devices. Every timestamp a record carries is moved.
//
//   capgen IN.cap OUT.cap N
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capture/capture_file.h"
#include "decode/event.h"

using namespace steptrace;

namespace {

struct Record {
  std::vector<uint8_t> bytes;
};

template <typename T>
void shift_field(std::vector<uint8_t>& b, size_t off, uint64_t by) {
  if (b.size() < off + sizeof(T)) return;
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  if (v) v += by;
  std::memcpy(b.data() + off, &v, sizeof(T));
}

void shift(std::vector<uint8_t>& b, uint64_t by) {
  st_event_header h;
  std::memcpy(&h, b.data(), sizeof(h));
  shift_field<uint64_t>(b, offsetof(st_event_header, ts_ns), by);
  switch (h.kind) {
    case ST_EV_ACCEL_IOCTL: shift_field<uint64_t>(b, offsetof(st_accel_ioctl, enter_ts), by); break;
    case ST_EV_RDMA_VERB: shift_field<uint64_t>(b, offsetof(st_rdma_verb, enter_ts), by); break;
    case ST_EV_BLOCK_RQ:
      shift_field<uint64_t>(b, offsetof(st_block_rq, insert_ts), by);
      shift_field<uint64_t>(b, offsetof(st_block_rq, issue_ts), by);
      break;
    default: break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: capgen IN.cap OUT.cap N\n");
    return 2;
  }
  const long n = std::atol(argv[3]);
  if (n < 1) {
    std::fprintf(stderr, "capgen: N must be at least 1\n");
    return 2;
  }
  std::vector<Record> recs;
  uint64_t first = 0, last = 0;
  auto in = read_capture(argv[1], [&](const void* d, size_t len) {
    if (len < sizeof(st_event_header)) return;
    Record r;
    r.bytes.assign(static_cast<const uint8_t*>(d), static_cast<const uint8_t*>(d) + len);
    st_event_header h;
    std::memcpy(&h, d, sizeof(h));
    if (!first || h.ts_ns < first) first = h.ts_ns;
    if (h.ts_ns > last) last = h.ts_ns;
    recs.push_back(std::move(r));
  });
  if (!in) {
    std::fprintf(stderr, "capgen: %s: %s\n", argv[1], in.error().message.c_str());
    return 1;
  }
  if (recs.empty()) {
    std::fprintf(stderr, "capgen: %s holds no records\n", argv[1]);
    return 1;
  }
  const uint64_t start = in->meta.value("window_start_ns", first);
  const uint64_t end = std::max(in->window_end_ns.value_or(last), last);
  const uint64_t period = end - std::min(start, first) + (end - first) / recs.size();
  nlohmann::json meta = in->meta;
  meta["capgen"] = {{"source", argv[1]}, {"copies", n}};
  CaptureWriterOptions opt;
  opt.overwrite = true;
  auto w = CaptureWriter::create(argv[2], meta, opt);
  if (!w) {
    std::fprintf(stderr, "capgen: %s: %s\n", argv[2], w.error().message.c_str());
    return 1;
  }
  uint64_t written = 0;
  for (long k = 0; k < n; ++k) {
    const uint64_t by = static_cast<uint64_t>(k) * period;
    for (const auto& r : recs) {
      st_event_header h;
      std::memcpy(&h, r.bytes.data(), sizeof(h));
      if ((h.kind == ST_EV_TASK_NEW || h.kind == ST_EV_TASK_EXEC) && k > 0) continue;
      if (h.kind == ST_EV_TASK_EXIT && k + 1 < n) continue;
      std::vector<uint8_t> b = r.bytes;
      shift(b, by);
      if (auto st = (*w)->append(b.data(), b.size()); !st) {
        std::fprintf(stderr, "capgen: %s\n", st.error().message.c_str());
        return 1;
      }
      ++written;
    }
  }
  DropStats drops = in->drops;  // as if each copy lost what the input did
  for (size_t k = 0; k < ST_EV_KIND_MAX; ++k) {
    drops.emitted[k] *= static_cast<uint64_t>(n);
    drops.dropped[k] *= static_cast<uint64_t>(n);
  }
  if (auto st = (*w)->close(drops, end + static_cast<uint64_t>(n - 1) * period); !st) {
    std::fprintf(stderr, "capgen: %s\n", st.error().message.c_str());
    return 1;
  }
  std::printf("{\"out\": \"%s\", \"copies\": %ld, \"records\": %llu, \"trace_s\": %.1f}\n", argv[2], n,
              static_cast<unsigned long long>(written), static_cast<double>(n) * static_cast<double>(period) / 1e9);
  return 0;
}
