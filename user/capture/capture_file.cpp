// SPDX-License-Identifier: Apache-2.0
#include "capture/capture_file.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "steptrace_abi.h"
#include "util/json_text.h"
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

// Room kept for the trailer: every chunk is written only once the blocks for it
// and for a trailer after it are allocated, so a full disk refuses a chunk
// whole and the trailer still fits. The trailer is well under 1 KiB.
constexpr uint64_t kTrailerReserve = 4096;
constexpr size_t kMaxEndReason = 200;

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

Status check_capture_path(const std::string& path, bool overwrite) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Ok{};
    return make_error(fmt::format("cannot check {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) return make_error(fmt::format("{} is a directory", path));
  if (!overwrite) return make_error(fmt::format("{} already exists (--force overwrites it)", path));
  return Ok{};
}

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::create(const std::string& path, const nlohmann::json& meta,
                                                             const CaptureWriterOptions& opt) {
  if (auto s = check_capture_path(path, opt.overwrite); !s) return s.error();
  std::unique_ptr<CaptureWriter> w(new CaptureWriter());
  w->path_ = path;
  w->tmp_path_ = path + ".tmp";
  w->max_bytes_ = opt.max_bytes;
  w->overwrite_ = opt.overwrite;
  // Strings in the metadata (argv, host) may hold any bytes: replace invalid UTF-8 rather than throw.
  std::string m = json_text(meta);
  std::vector<uint8_t> h(kMagic, kMagic + 8);
  put_u32(h, kCaptureFormatVersion);
  put_u32(h, ST_ABI_VERSION);
  put_u32(h, static_cast<uint32_t>(m.size()));
  h.insert(h.end(), m.begin(), m.end());
  if (opt.max_bytes && h.size() + kTrailerReserve > opt.max_bytes)
    return make_error(fmt::format("--max-size {} is too small: the capture header and trailer alone take {} bytes",
                                  opt.max_bytes, h.size() + kTrailerReserve));
  // O_EXCL|O_NOFOLLOW: never write through a symlink planted in the output directory.
  w->fd_ = ::open(w->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (w->fd_ < 0) return make_error(fmt::format("cannot create {}: {}", w->tmp_path_, std::strerror(errno)));
  int e = w->reserve(h.size() + kTrailerReserve);
  if (e == 0) e = w->write_all(h.data(), h.size());
  if (e != 0) {
    ::unlink(w->tmp_path_.c_str());
    return make_error(fmt::format("cannot write {}: {}", w->tmp_path_, std::strerror(e)));
  }
  w->committed_ = w->header_bytes_ = h.size();
  w->buf_.reserve(kChunkRaw + 4096);
  return w;
}

CaptureWriter::~CaptureWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  // Never finished and holding no record (the session failed to start: a
  // command that could not run): nothing to keep, and a stale .tmp would
  // make the next recording to this path refuse. One with records stays
  // for the salvage.
  if (committed_ <= header_bytes_ && buf_.empty()) ::unlink(tmp_path_.c_str());
}

int CaptureWriter::write_all(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t r = ::write(fd_, b, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return 0;
}

void CaptureWriter::cut_back() {
  // Both can only fail on a bad fd; the reader then keeps the prefix before the partial bytes.
  (void)::ftruncate(fd_, static_cast<off_t>(committed_));
  (void)::lseek(fd_, static_cast<off_t>(committed_), SEEK_SET);
}

int CaptureWriter::reserve(uint64_t n) {
  if (!can_reserve_) return 0;
  // KEEP_SIZE: the blocks are allocated, the file size is not changed.
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(committed_), static_cast<off_t>(n)) == 0) return 0;
  if (errno == EOPNOTSUPP || errno == ENOSYS) {
    can_reserve_ = false;  // this filesystem cannot preallocate: rely on truncating a failed chunk
    return 0;
  }
  return errno;
}

Error CaptureWriter::stop(std::string reason, std::string message) {
  buf_.clear();
  buffered_records_ = 0;
  if (end_reason_.empty()) {
    end_reason_ = std::move(reason);
    stop_message_ = std::move(message);
  }
  return make_error(stop_message_);
}

Status CaptureWriter::append(const void* rec, size_t len) {
  if (stopped()) return make_error(stop_message_);
  put_u32(buf_, static_cast<uint32_t>(len));
  const auto* b = static_cast<const uint8_t*>(rec);
  buf_.insert(buf_.end(), b, b + len);
  ++buffered_records_;
  if (buf_.size() >= kChunkRaw) return flush_chunk();
  return Ok{};
}

Status CaptureWriter::flush_chunk() {
  if (stopped()) return make_error(stop_message_);
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
  const uint64_t n = 16 + zlen;
  if (max_bytes_ && committed_ + n + kTrailerReserve > max_bytes_)
    return stop("max_size", fmt::format("capture {} reached --max-size {} bytes: recording stopped ({} records "
                                        "written, {} bytes)",
                                        path_, max_bytes_, records_written_, committed_));
  int e = reserve(n + kTrailerReserve);
  if (e == 0) {
    e = write_all(out.data(), n);
    // Cut a partly written chunk off, so the file ends at its last complete
    // chunk and the trailer follows it (without a reservation, this also
    // frees the blocks the trailer needs).
    if (e != 0) cut_back();
  }
  if (e != 0) {
    return stop("write_error: " + errno_text(e),
                fmt::format("cannot write {}: {}: recording stopped, the capture keeps its first {} records",
                            tmp_path_, std::strerror(e), records_written_));
  }
  committed_ += n;
  records_written_ += buffered_records_;
  buffered_records_ = 0;
  buf_.clear();
  return Ok{};
}

Status CaptureWriter::close(const DropStats& drops, uint64_t window_end_ns, std::string_view how_ended) {
  if (closed_) return Ok{};
  closed_ = true;
  if (!stopped()) (void)flush_chunk();  // a failure stops the writer; the trailer below says so
  std::string how = stopped() ? end_reason_ : std::string(how_ended);
  if (how.size() > kMaxEndReason) how.resize(kMaxEndReason);
  auto tj = drops_json(drops, records_written_);
  tj["window_end_ns"] = window_end_ns;
  tj["end"] = how;
  std::string t = json_text(tj);
  std::vector<uint8_t> tr(kTrailer, kTrailer + 4);
  put_u32(tr, static_cast<uint32_t>(t.size()));
  tr.insert(tr.end(), t.begin(), t.end());
  std::string failure;
  if (int e = write_all(tr.data(), tr.size()); e != 0) {
    cut_back();
    failure = fmt::format("cannot write the trailer of {}: {} (the capture is a readable prefix without it)",
                          tmp_path_, std::strerror(e));
  } else {
    committed_ += tr.size();
    // Give back the blocks reserved past the end.
    (void)::ftruncate(fd_, static_cast<off_t>(committed_));
  }
  if (::fsync(fd_) != 0 && failure.empty()) failure = fmt::format("fsync {}: {}", tmp_path_, std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  int rc = 0;
  if (overwrite_) {
    rc = ::rename(tmp_path_.c_str(), path_.c_str());
  } else {
    // Never replace a file that appeared at the path while recording.
    rc = ::renameat2(AT_FDCWD, tmp_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      // No RENAME_NOREPLACE on this filesystem: link() refuses an existing name too.
      rc = ::link(tmp_path_.c_str(), path_.c_str());
      if (rc == 0) ::unlink(tmp_path_.c_str());
    }
  }
  if (rc != 0) {
    int e = errno;
    return make_error(fmt::format("cannot rename {} to {}: {}{}{}", tmp_path_, path_, std::strerror(e),
                                  failure.empty() ? "" : "; ", failure));
  }
  if (!failure.empty()) return make_error(failure);
  return Ok{};
}

namespace {

// Where the reader's bytes come from: a file read piece by piece, or memory
// (the fuzzer). read() returns fewer than n bytes only at the end.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual Result<size_t> read(uint8_t* dst, size_t n) = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  Result<size_t> read(uint8_t* dst, size_t n) override {
    size_t k = std::min(n, size_ - off_);
    if (k) std::memcpy(dst, data_ + off_, k);
    off_ += k;
    return k;
  }

 private:
  const uint8_t* data_;
  size_t size_, off_ = 0;
};

class FdSource : public ByteSource {
 public:
  explicit FdSource(int fd) : fd_(fd) {}
  Result<size_t> read(uint8_t* dst, size_t n) override {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fd_, dst + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return make_error(fmt::format("read error at offset {}: {}", off_ + got, std::strerror(errno)));
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    off_ += got;
    return got;
  }

 private:
  int fd_;
  uint64_t off_ = 0;
};

// Trailer fields: a wrong JSON type is a warning and the field is ignored.
std::optional<uint64_t> trailer_u64(const nlohmann::json& t, const char* key, std::vector<std::string>& warnings) {
  auto it = t.find(key);
  if (it == t.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  warnings.push_back(fmt::format("capture trailer: \"{}\" is not an unsigned integer ({}); ignored", key,
                                 it->type_name()));
  return std::nullopt;
}

// Reads n bytes into buf, growing it as the bytes arrive: a length field that
// claims more than the file holds costs at most one step of memory.
Result<size_t> read_growing(ByteSource& src, std::vector<uint8_t>& buf, size_t n) {
  constexpr size_t kStep = 1 << 20;
  buf.clear();
  size_t have = 0;
  while (have < n) {
    size_t k = std::min(kStep, n - have);
    buf.resize(have + k);
    auto got = src.read(buf.data() + have, k);
    if (!got) return got.error();
    have += *got;
    if (*got < k) break;
  }
  buf.resize(have);
  return have;
}

// One chunk or section at a time: memory is bounded by kMaxChunk, not by the file.
Result<CaptureContents> read_stream(ByteSource& src, const std::function<void(const void*, size_t)>& fn) {
  CaptureContents c;
  auto err = [](size_t off, const std::string& why) {
    return make_error(fmt::format("corrupt capture at offset {}: {}", off, why));
  };
  uint8_t h[20];
  auto got = src.read(h, sizeof(h));
  if (!got) return got.error();
  if (*got >= 8 && *got < 20 && std::memcmp(h, kMagic, 8) == 0) return err(*got, "file header cut short");
  if (*got < 20 || std::memcmp(h, kMagic, 8) != 0) return make_error("not a steptrace capture (bad magic at offset 0)");
  uint32_t ver = get_u32(h + 8), abi = get_u32(h + 12), mlen = get_u32(h + 16);
  if (ver > kCaptureFormatVersion)
    return make_error(fmt::format("capture format version {} (offset 8) is newer than this steptrace ({}): upgrade steptrace",
                                  ver, kCaptureFormatVersion));
  if (ver == 0) return err(8, "format version 0");
  if (abi < ST_ABI_MIN_READABLE || abi > ST_ABI_VERSION)
    return make_error(fmt::format("capture ABI version {} (offset 12) is not readable by this steptrace (reads {}..{})", abi,
                                  ST_ABI_MIN_READABLE, ST_ABI_VERSION));
  if (mlen > kMaxMeta) return err(16, "metadata length out of range");
  std::vector<uint8_t> buf(mlen);
  if (got = src.read(buf.data(), mlen); !got) return got.error();
  if (*got < mlen) return err(16, "metadata length out of range");
  c.meta = nlohmann::json::parse(buf.begin(), buf.end(), nullptr, false);
  if (c.meta.is_discarded()) return err(20, "metadata is not valid JSON");
  if (!c.meta.is_object()) return err(20, fmt::format("metadata is a JSON {}, not an object", c.meta.type_name()));
  size_t off = 20 + mlen;
  std::vector<uint8_t> raw;
  for (;;) {
    uint8_t sh[16];
    if (got = src.read(sh, 8); !got) return got.error();
    if (*got == 0) break;
    if (*got < 8) return err(off, "truncated section header");
    if (std::memcmp(sh, kTrailer, 4) == 0) {
      uint32_t tlen = get_u32(sh + 4);
      if (tlen > kMaxMeta) return err(off + 4, "trailer length out of range");
      buf.resize(tlen);
      if (got = src.read(buf.data(), tlen); !got) return got.error();
      if (*got < tlen) return err(off + 4, "trailer length out of range");
      c.trailer = nlohmann::json::parse(buf.begin(), buf.end(), nullptr, false);
      if (c.trailer.is_discarded() || !c.trailer.is_object()) return err(off + 8, "trailer is not valid JSON");
      auto e = c.trailer.find("emitted");
      auto d = c.trailer.find("dropped");
      if (e == c.trailer.end() || d == c.trailer.end() || !e->is_array() || !d->is_array())
        return err(off + 8, "trailer lacks drop counters");
      for (size_t k = 0; k < ST_EV_KIND_MAX && k < e->size() && k < d->size(); ++k) {
        if (!(*e)[k].is_number_unsigned() || !(*d)[k].is_number_unsigned()) return err(off + 8, "bad counter");
        c.drops.emitted[k] = (*e)[k].get<uint64_t>();
        c.drops.dropped[k] = (*d)[k].get<uint64_t>();
      }
      c.trailer_records = trailer_u64(c.trailer, "records", c.warnings);
      c.window_end_ns = trailer_u64(c.trailer, "window_end_ns", c.warnings);
      if (auto it = c.trailer.find("end"); it != c.trailer.end()) {
        if (it->is_string())
          c.end = it->get<std::string>();
        else
          c.warnings.push_back(fmt::format("capture trailer: \"end\" is not a string ({}); ignored", it->type_name()));
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
      uint8_t extra;
      if (got = src.read(&extra, 1); !got) return got.error();
      if (*got != 0) return err(off, "data after the trailer");
      return c;
    }
    if (std::memcmp(sh, kChunk, 4) != 0) return err(off, "unknown section (expected a chunk or the trailer)");
    if (got = src.read(sh + 8, 8); !got) return got.error();
    if (*got < 8) return err(off, "truncated chunk header");
    uint32_t rlen = get_u32(sh + 4), zlen = get_u32(sh + 8), crc = get_u32(sh + 12);
    if (rlen > kMaxChunk || zlen > kMaxChunk) return err(off + 4, "chunk length out of range");
    if (got = read_growing(src, buf, zlen); !got) return got.error();
    if (*got < zlen) {
      // An interrupted recording: keep the readable prefix, say so.
      c.truncated = true;
      return c;
    }
    // deflate expands at most ~1032:1: a larger claim is corrupt (and not worth allocating).
    if (static_cast<uint64_t>(rlen) > static_cast<uint64_t>(zlen) * 1032 + 64)
      return err(off + 16, "chunk does not decompress");
    raw.resize(rlen);
    uLongf out = rlen;
    if (uncompress(raw.data(), &out, buf.data(), zlen) != Z_OK || out != rlen)
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

}  // namespace

Result<CaptureContents> read_capture_bytes(const uint8_t* data, size_t size,
                                           const std::function<void(const void*, size_t)>& fn) {
  MemorySource src(data, size);
  return read_stream(src, fn);
}

Result<CaptureContents> read_capture(const std::string& path, const std::function<void(const void*, size_t)>& fn) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return make_error(fmt::format("{} is a directory", path));
  }
  FdSource src(fd);
  auto r = read_stream(src, fn);
  ::close(fd);
  if (!r) return make_error(fmt::format("{}: {}", path, r.error().message));
  return r;
}

}  // namespace steptrace
