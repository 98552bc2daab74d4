// SPDX-License-Identifier: Apache-2.0
// `steptrace top` as a command: a live Session, polled, with a frame drawn
// by the top sink (export/top.h) every interval, until the job ends or q.
#include "session/top_command.h"

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <future>
#include <memory>
#include <cstdlib>
#include <thread>

#include "export/top.h"
#include "session/session.h"
#include "util/log.h"
#include "util/mono_clock.h"

namespace steptrace {
namespace {

// Terminal state: raw-ish input (no echo, no line buffering; Ctrl-C still
// raises SIGINT), alternate screen, hidden cursor. Restored by the destructor
// and, should the process end some other way, at exit. Every call retries on
// EINTR and the restored modes are read back: a Ctrl-C (or the job's
// SIGCHLD) that interrupts the restore must not leave the terminal without
// echo, as it once did on a loaded CI machine.
class TerminalGuard {
 public:
  TerminalGuard() {
    in_tty_ = ::isatty(0) == 1;
    out_tty_ = ::isatty(1) == 1;
    if (in_tty_ && tcgetattr(0, &saved_) == 0) {
      termios t = saved_;
      t.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
      t.c_cc[VMIN] = 0;
      t.c_cc[VTIME] = 0;
      have_saved_ = set_modes(t);
    }
    if (out_tty_) write_str("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
    active_ = this;
    static bool registered = false;
    if (!registered) registered = std::atexit([] { if (active_) active_->restore(); }) == 0;
  }
  ~TerminalGuard() {
    restore();
    active_ = nullptr;
  }
  TerminalGuard(const TerminalGuard&) = delete;
  TerminalGuard& operator=(const TerminalGuard&) = delete;
  void restore() {
    if (restored_) return;
    restored_ = true;
    if (out_tty_) write_str("\x1b[0m\x1b[?25h\x1b[?1049l");
    if (have_saved_ && !set_modes(saved_)) log::warn("could not restore the terminal's modes (try: stty sane)");
  }
  bool out_tty() const { return out_tty_; }
  bool in_tty() const { return in_tty_; }
  static void write_str(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::write(1, s.data() + off, s.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }

 private:
  // tcsetattr, until the modes read back are the ones asked for.
  static bool set_modes(const termios& want) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (tcsetattr(0, TCSANOW, &want) != 0 && errno != EINTR) return false;
      termios now{};
      if (tcgetattr(0, &now) == 0 && now.c_lflag == want.c_lflag && now.c_cc[VMIN] == want.c_cc[VMIN] &&
          now.c_cc[VTIME] == want.c_cc[VTIME])
        return true;
    }
    return false;
  }
  static inline TerminalGuard* active_ = nullptr;
  termios saved_{};
  bool have_saved_ = false, in_tty_ = false, out_tty_ = false, restored_ = false;
};

// True when 'q' (or Q) is waiting on stdin.
bool quit_pressed() {
  pollfd p{0, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) return false;
  char buf[64];
  ssize_t n = ::read(0, buf, sizeof(buf));
  for (ssize_t i = 0; i < n; ++i)
    if (buf[i] == 'q' || buf[i] == 'Q') return true;
  return false;
}

}  // namespace

Result<SessionReport> run_top(const Options& o, std::atomic<int>* signal) {
  auto session = Session::start(o);
  if (!session) return session.error();
  auto& s = **session;
  TopFrameState state;
  {
    TerminalGuard term;
    const bool color = term.out_tty() && !o.no_color;
    const auto interval = std::chrono::duration<double>(o.top_interval_s);
    auto next_frame = std::chrono::steady_clock::now();
    // A frame is analysed and drawn on a worker thread from a copy the drain
    // thread takes: the drain never waits for the analysis. One at a time;
    // a refresh that comes while one is in flight waits for the next.
    std::future<std::string> pending;
    for (;;) {
      if (auto st = s.poll(); !st) return st.error();
      if (int sig = signal ? signal->exchange(0) : 0) s.request_stop(sig, "signal " + signal_name(sig));
      if (term.in_tty() && quit_pressed()) s.request_stop(SIGTERM, "quit");
      if (s.done()) break;
      auto now = std::chrono::steady_clock::now();
      if (now >= next_frame && !pending.valid()) {
        next_frame = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
        auto snap = s.snapshot();
        if (!snap) return snap.error();
        TopView view;
        view.color = color;
        view.stopping = s.stop_status();
        if (term.out_tty()) {
          winsize ws{};
          if (::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
            view.width = ws.ws_col;
            view.height = ws.ws_row;
          }
        }
        pending = std::async(std::launch::async,
                             [snap = std::make_shared<LiveSnapshot>(std::move(*snap)), view, &state]() mutable {
                               Session::analyse(*snap);
                               std::string frame = render_top_frame(snap->report, view, state);
                               snap.reset();
                               ::malloc_trim(0);  // the copy was a window's worth: give it back
                               return frame;
                             });
      }
      if (pending.valid() && pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        std::string frame = pending.get();
        if (term.out_tty()) {
          // Home, then each line cleared to its end, then the rest of the screen.
          std::string out = "\x1b[H";
          size_t p = 0;
          while (p < frame.size()) {
            size_t nl = frame.find('\n', p);
            out += frame.substr(p, nl - p) + "\x1b[K\r\n";
            p = nl + 1;
          }
          out += "\x1b[J";
          TerminalGuard::write_str(out);
        } else {
          TerminalGuard::write_str(frame + "\n");
        }
      }
      // At most 50 ms (a key press, q, is answered at once), and no later than
      // the device counters' next sample (an attached datastore: every 10 ms).
      uint64_t sleep_ns = std::min<uint64_t>(o.drain_ms, 50) * 1'000'000ull;
      if (const uint64_t due = s.next_sample_due_ns(); due != UINT64_MAX) {
        const uint64_t t = monotonic_ns();
        sleep_ns = std::min(sleep_ns, due > t ? due - t : 0);
      }
      std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
    }
  }  // terminal restored here, before the final report is printed
  return s.finish();
}

}  // namespace steptrace
