// SPDX-License-Identifier: Apache-2.0
#include "capture/capture_file.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "steptrace_abi.h"
#include "util/sys_root.h"

namespace steptrace {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'E', 'P', 'T', 'R', 'C', 'E'};
constexpr char kChunk[4] = {'S', 'T', 'C', 'K'};
constexpr char kTrailer[4] = {'S', 'T', 'T', 'R'};
constexpr size_t kChunkRaw = 1 << 20;
constexpr uint32_t kMaxChunk = 64u << 20;  // refuse absurd lengths before allocating
constexpr uint32_t kMaxMeta = 1u << 20;

void put_u32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

nlohmann::json drops_json(const DropStats& d, uint64_t records) {
  nlohmann::json e = nlohmann::json::array(), x = nlohmann::json::array();
  for (int k = 0; k < ST_EV_KIND_MAX; ++k) {
    e.push_back(d.emitted[k]);
    x.push_back(d.dropped[k]);
  }
  // Losses by name (kinds may be added; a reader ignores names it does not know).
  nlohmann::json l = nlohmann::json::object();
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) l[std::string(loss_name(k))] = d.losses[k];
  return {{"emitted", e}, {"dropped", x}, {"records", records}, {"losses", l},
          {"kretprobe_missed", std::string(loss_measure_name(d.kretprobe))}};
}

}  // namespace

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::create(const std::string& path, const nlohmann::json& meta) {
  std::unique_ptr<CaptureWriter> w(new CaptureWriter());
  w->path_ = path;
  w->tmp_path_ = path + ".tmp";
  // O_EXCL|O_NOFOLLOW: never write through a symlink planted in the output directory.
  w->fd_ = ::open(w->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (w->fd_ < 0) return make_error(fmt::format("cannot create {}: {}", w->tmp_path_, std::strerror(errno)));
  std::string m = meta.dump();
  std::vector<uint8_t> h(kMagic, kMagic + 8);
  put_u32(h, kCaptureFormatVersion);
  put_u32(h, ST_ABI_VERSION);
  put_u32(h, static_cast<uint32_t>(m.size()));
  h.insert(h.end(), m.begin(), m.end());
  if (auto s = w->write_all(h.data(), h.size()); !s) return s.error();
  w->buf_.reserve(kChunkRaw + 4096);
  return w;
}

CaptureWriter::~CaptureWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status CaptureWriter::write_all(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t r = ::write(fd_, b, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return make_error(fmt::format("write {}: {}", tmp_path_, std::strerror(errno)));
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return Ok{};
}

Status CaptureWriter::append(const void* rec, size_t len) {
  put_u32(buf_, static_cast<uint32_t>(len));
  const auto* b = static_cast<const uint8_t*>(rec);
  buf_.insert(buf_.end(), b, b + len);
  if (buf_.size() >= kChunkRaw) return flush_chunk();
  return Ok{};
}

Status CaptureWriter::flush_chunk() {
  if (buf_.empty()) return Ok{};
  uLongf zlen = compressBound(static_cast<uLong>(buf_.size()));
  std::vector<uint8_t> out(16 + zlen);
  if (compress2(out.data() + 16, &zlen, buf_.data(), static_cast<uLong>(buf_.size()), Z_BEST_SPEED) != Z_OK)
    return make_error("zlib compression failed");
  std::vector<uint8_t> hdr(kChunk, kChunk + 4);
  put_u32(hdr, static_cast<uint32_t>(buf_.size()));
  put_u32(hdr, static_cast<uint32_t>(zlen));
  put_u32(hdr, static_cast<uint32_t>(crc32(0, buf_.data(), static_cast<uInt>(buf_.size()))));
  std::memcpy(out.data(), hdr.data(), 16);
  buf_.clear();
  return write_all(out.data(), 16 + zlen);
}

Status CaptureWriter::close(const DropStats& drops, uint64_t records, uint64_t window_end_ns) {
  if (closed_) return Ok{};
  closed_ = true;
  if (auto s = flush_chunk(); !s) return s;
  auto tj = drops_json(drops, records);
  tj["window_end_ns"] = window_end_ns;
  std::string t = tj.dump();
  std::vector<uint8_t> tr(kTrailer, kTrailer + 4);
  put_u32(tr, static_cast<uint32_t>(t.size()));
  tr.insert(tr.end(), t.begin(), t.end());
  if (auto s = write_all(tr.data(), tr.size()); !s) return s;
  if (::fsync(fd_) != 0) return make_error(fmt::format("fsync {}: {}", tmp_path_, std::strerror(errno)));
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    return make_error(fmt::format("rename {} -> {}: {}", tmp_path_, path_, std::strerror(errno)));
  return Ok{};
}

Result<CaptureContents> read_capture_bytes(const uint8_t* data, size_t size,
                                           const std::function<void(const void*, size_t)>& fn) {
  CaptureContents c;
  auto err = [](size_t off, const std::string& why) {
    return make_error(fmt::format("corrupt capture at offset {}: {}", off, why));
  };
  if (size >= 8 && size < 20 && std::memcmp(data, kMagic, 8) == 0) return err(size, "file header cut short");
  if (size < 20 || std::memcmp(data, kMagic, 8) != 0)
    return make_error("not a steptrace capture (bad magic at offset 0)");
  uint32_t ver = get_u32(data + 8), abi = get_u32(data + 12), mlen = get_u32(data + 16);
  if (ver > kCaptureFormatVersion)
    return make_error(fmt::format("capture format version {} (offset 8) is newer than this steptrace ({}): upgrade steptrace",
                                  ver, kCaptureFormatVersion));
  if (ver == 0) return err(8, "format version 0");
  if (abi < ST_ABI_MIN_READABLE || abi > ST_ABI_VERSION)
    return make_error(fmt::format("capture ABI version {} (offset 12) is not readable by this steptrace (reads {}..{})", abi,
                                  ST_ABI_MIN_READABLE, ST_ABI_VERSION));
  if (mlen > kMaxMeta || 20 + static_cast<size_t>(mlen) > size) return err(16, "metadata length out of range");
  c.meta = nlohmann::json::parse(data + 20, data + 20 + mlen, nullptr, false);
  if (c.meta.is_discarded()) return err(20, "metadata is not valid JSON");
  size_t off = 20 + mlen;
  std::vector<uint8_t> raw;
  while (off < size) {
    if (size - off < 8) return err(off, "truncated section header");
    if (std::memcmp(data + off, kTrailer, 4) == 0) {
      uint32_t tlen = get_u32(data + off + 4);
      if (tlen > kMaxMeta || size - off - 8 < tlen) return err(off + 4, "trailer length out of range");
      c.trailer = nlohmann::json::parse(data + off + 8, data + off + 8 + tlen, nullptr, false);
      if (c.trailer.is_discarded() || !c.trailer.is_object()) return err(off + 8, "trailer is not valid JSON");
      auto& e = c.trailer["emitted"];
      auto& d = c.trailer["dropped"];
      if (!e.is_array() || !d.is_array()) return err(off + 8, "trailer lacks drop counters");
      for (size_t k = 0; k < ST_EV_KIND_MAX && k < e.size() && k < d.size(); ++k) {
        if (!e[k].is_number_unsigned() || !d[k].is_number_unsigned()) return err(off + 8, "bad counter");
        c.drops.emitted[k] = e[k].get<uint64_t>();
        c.drops.dropped[k] = d[k].get<uint64_t>();
      }
      // Losses: absent in captures of older steptrace (read as zero).
      if (auto l = c.trailer.find("losses"); l != c.trailer.end()) {
        if (!l->is_object()) return err(off + 8, "trailer losses are not an object");
        for (int k = 0; k < ST_LOSS_KIND_MAX; ++k) {
          auto v = l->find(std::string(loss_name(k)));
          if (v == l->end()) continue;
          if (!v->is_number_unsigned()) return err(off + 8, "bad loss counter");
          c.drops.losses[k] = v->get<uint64_t>();
        }
      }
      if (auto m = c.trailer.find("kretprobe_missed"); m != c.trailer.end() && m->is_string())
        for (auto v : {LossMeasure::measured, LossMeasure::not_measurable})
          if (m->get<std::string>() == loss_measure_name(v)) c.drops.kretprobe = v;
      off += 8 + tlen;
      if (off != size) return err(off, "data after the trailer");
      return c;
    }
    if (std::memcmp(data + off, kChunk, 4) != 0) return err(off, "unknown section (expected a chunk or the trailer)");
    if (size - off < 16) return err(off, "truncated chunk header");
    uint32_t rlen = get_u32(data + off + 4), zlen = get_u32(data + off + 8), crc = get_u32(data + off + 12);
    if (rlen > kMaxChunk || zlen > kMaxChunk) return err(off + 4, "chunk length out of range");
    if (size - off - 16 < zlen) {
      // An interrupted recording: keep the readable prefix, say so.
      c.truncated = true;
      return c;
    }
    raw.resize(rlen);
    uLongf got = rlen;
    if (uncompress(raw.data(), &got, data + off + 16, zlen) != Z_OK || got != rlen)
      return err(off + 16, "chunk does not decompress");
    if (static_cast<uint32_t>(crc32(0, raw.data(), rlen)) != crc) return err(off + 12, "chunk checksum mismatch");
    size_t p = 0;
    while (p < rlen) {
      if (rlen - p < 4) return err(off + 16, "record length cut inside a chunk");
      uint32_t len = get_u32(raw.data() + p);
      p += 4;
      if (len > rlen - p) return err(off + 16, "record runs past its chunk");
      fn(raw.data() + p, len);
      ++c.records;
      p += len;
    }
    off += 16 + zlen;
  }
  c.truncated = true;  // ended without a trailer
  return c;
}

Result<CaptureContents> read_capture(const std::string& path, const std::function<void(const void*, size_t)>& fn) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  ::fstat(fd, &st);
  std::vector<uint8_t> data(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(got);
  auto r = read_capture_bytes(data.data(), data.size(), fn);
  if (!r) return make_error(fmt::format("{}: {}", path, r.error().message));
  return r;
}

}  // namespace steptrace
