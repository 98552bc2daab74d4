// SPDX-License-Identifier: Apache-2.0
#include "loader/drain_wait.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/mono_clock.h"

namespace steptrace {

namespace {
// Drains that found nothing before the sleep can grow to the idle interval
// (with idle_after_ms without records as well).
constexpr int kEmptyDrainsBeforeIdle = 3;

enum : uint32_t { kRing = 1, kInotify = 2, kMounts = 3 };

bool add(int ep, int fd, uint32_t events, uint32_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u32 = tag;
  return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0;
}
}  // namespace

Result<std::unique_ptr<DrainWait>> DrainWait::create(int ring_fd, uint32_t drain_ms, uint32_t idle_ms,
                                                     uint32_t idle_after_ms) {
  std::unique_ptr<DrainWait> w(new DrainWait());
  w->idle_after_ns_ = static_cast<uint64_t>(idle_after_ms) * 1'000'000ull;
  w->drain_ms_ = std::max<uint32_t>(drain_ms, 1);
  w->idle_ms_ = std::max(idle_ms, w->drain_ms_);
  w->ep_ = epoll_create1(EPOLL_CLOEXEC);
  if (w->ep_ < 0) return make_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
  // Edge-triggered: a forced wake-up ends one sleep; records that are merely
  // there (a busy session between two drains) must not end every sleep.
  if (ring_fd >= 0 && !add(w->ep_, ring_fd, EPOLLIN | EPOLLET, kRing))
    return make_error(fmt::format("cannot poll the ring buffer: {}", std::strerror(errno)));
  return w;
}

DrainWait::~DrainWait() {
  for (int fd : {ep_, inotify_, mounts_})
    if (fd >= 0) ::close(fd);
}

void DrainWait::watch_paths(const std::vector<std::string>& paths) {
  if (paths == watched_) return;
  watched_ = paths;
  for (int* fd : {&inotify_, &mounts_})
    if (*fd >= 0) {
      ::close(*fd);  // closing removes it from the epoll set
      *fd = -1;
    }
  if (paths.empty()) return;
  inotify_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ >= 0) {
    bool any = false;
    for (const auto& p : paths) {
      auto dir = std::filesystem::path(p).parent_path();
      if (dir.empty()) dir = ".";
      any |= inotify_add_watch(inotify_, dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_ATTRIB) >= 0;
    }
    if (!any || !add(ep_, inotify_, EPOLLIN, kInotify)) {
      ::close(inotify_);
      inotify_ = -1;
    }
  }
  // The mount table reports a change as EPOLLPRI (and EPOLLERR) once per change.
  mounts_ = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (mounts_ >= 0 && !add(ep_, mounts_, EPOLLPRI, kMounts)) {
    ::close(mounts_);
    mounts_ = -1;
  }
}

bool DrainWait::next_is_idle(size_t records) {
  empty_drains_ = records > 0 ? 0 : std::min(empty_drains_ + 1, kEmptyDrainsBeforeIdle);
  const uint64_t now = monotonic_ns();
  if (records > 0 || last_busy_ns_ == 0) last_busy_ns_ = now;
  idle_next_ = empty_drains_ >= kEmptyDrainsBeforeIdle && now - last_busy_ns_ >= idle_after_ns_;
  return idle_next_;
}

void DrainWait::drain_events() {
  if (inotify_ < 0) return;
  alignas(inotify_event) char buf[4096];
  while (::read(inotify_, buf, sizeof(buf)) > 0) {
  }
}

void DrainWait::sleep(uint64_t deadline_ns) {
  uint64_t ms = idle_next_ ? idle_ms_ : drain_ms_;
  if (idle_next_) ++idle_sleeps_;
  idle_next_ = false;
  if (deadline_ns) {
    const uint64_t now = monotonic_ns();
    const uint64_t left = deadline_ns > now ? (deadline_ns - now + 999'999) / 1'000'000 : 0;
    ms = std::min(ms, left);
  }
  epoll_event evs[4];
  int n = epoll_wait(ep_, evs, 4, static_cast<int>(ms));
  for (int i = 0; i < n; ++i)
    if (evs[i].data.u32 == kInotify) drain_events();
}

}  // namespace steptrace
