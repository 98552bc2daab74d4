// SPDX-License-Identifier: Apache-2.0
#include "export/top.h"
#include "util/text.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <thread>

#include "export/report_stats.h"
#include "session/session.h"
#include "util/log.h"

namespace steptrace {
namespace {

std::string clip(std::string s, size_t w) {
  if (s.size() > w) s = std::string(utf8_prefix(s, w));
  return s;
}

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

std::string render_top_frame(const SessionReport& r, const TopView& view, TopFrameState& state) {
  const size_t W = static_cast<size_t>(std::max(40, view.width));
  auto bold = [&](const std::string& s) { return view.color ? "\x1b[1m" + s + "\x1b[0m" : s; };
  const auto& job = r.job;
  std::vector<std::string> lines;

  size_t steps = 0;
  for (const auto& rk : job.ranks) steps += rk.steps.size();
  double dt = r.wall_s - state.last_wall_s;
  double rate = dt > 0 && steps >= state.last_steps ? static_cast<double>(steps - state.last_steps) / dt : 0.0;
  state.last_wall_s = r.wall_s;
  state.last_steps = steps;

  lines.push_back(bold(clip(fmt::format("steptrace top - {:.0f} s - {} ranks - {} steps - {:.2f} steps/s{}", r.wall_s,
                                        job.ranks.size(), steps, rate, view.final_frame ? " - finished" : ""),
                            W)));
  std::string verdict = job.verdict.headline.empty() ? "waiting for steps..." : job.verdict.headline;
  if (r.incomplete()) verdict = "[INCOMPLETE] " + verdict;
  lines.push_back(clip("verdict: " + verdict, W));
  lines.push_back(clip(fmt::format("events {}  dropped {}  tracer CPU {:.1f}%", r.records, r.drops.total_dropped(),
                                   r.wall_s > 0 ? 100.0 * r.tracer_cpu_s / r.wall_s : 0.0),
                       W));
  lines.emplace_back();

  // Legend, wrapped to the width (visible length counted without colour codes).
  std::string legend = " ";
  size_t legend_len = 1;
  for (size_t c = 0; c < kCategories; ++c) {
    std::string g(1, category_glyph(c));
    std::string name(kCategoryNames[c]);
    size_t len = 1 + 1 + 1 + name.size();
    if (legend_len + len > W) {
      lines.push_back(legend);
      legend = " ";
      legend_len = 1;
    }
    legend += " " + (view.color ? fmt::format("\x1b[30;{}m{}\x1b[0m", category_ansi_bg(c), g) : g) + " " + name;
    legend_len += len;
  }
  lines.push_back(legend);
  lines.push_back(bold(clip(fmt::format("{:>4} {:>7} {:>5} {:>9}  breakdown of the last {} steps", "RANK", "PID",
                                        "STEPS", "LAST ms", view.window_steps),
                            W)));

  const size_t prefix = 4 + 1 + 7 + 1 + 5 + 1 + 9 + 2;
  const size_t suffix = 12;  // " <- straggler"
  const size_t bar_w = W > prefix + suffix + 10 ? W - prefix - suffix : 10;
  for (const auto& rk : job.ranks) {
    CategoryNs sum{};
    uint64_t total = 0;
    size_t first = rk.steps.size() > static_cast<size_t>(view.window_steps)
                       ? rk.steps.size() - static_cast<size_t>(view.window_steps)
                       : 0;
    for (size_t i = first; i < rk.steps.size(); ++i)
      for (size_t c = 0; c < kCategories; ++c) {
        sum[c] += rk.steps[i].ns[c];
        total += rk.steps[i].ns[c];
      }
    std::string bar;
    size_t used = 0;
    for (size_t c = 0; c < kCategories && total > 0; ++c) {
      size_t n = static_cast<size_t>(static_cast<double>(sum[c]) / static_cast<double>(total) *
                                         static_cast<double>(bar_w) +
                                     0.5);
      n = std::min(n, bar_w - used);
      if (n == 0) continue;
      std::string seg(n, category_glyph(c));
      bar += view.color ? fmt::format("\x1b[30;{}m{}\x1b[0m", category_ansi_bg(c), seg) : seg;
      used += n;
    }
    if (used < bar_w) bar += std::string(bar_w - used, ' ');
    uint64_t last = rk.steps.empty() ? 0 : rk.steps.back().duration();
    std::string line = fmt::format("{:>4} {:>7} {:>5} {:>9.1f}  ", rk.rank, rk.pid, rk.steps.size(),
                                   static_cast<double>(last) / 1e6) +
                       bar;
    if (rk.rank == job.verdict.straggler_rank)
      line += view.color ? " \x1b[1;31m<-straggler\x1b[0m" : " <-straggler";
    lines.push_back(line);
  }
  if (job.ranks.empty()) lines.emplace_back("  (no rank has driven the accelerator yet)");

  if (!job.verdict.evidence.empty()) {
    lines.emplace_back();
    lines.push_back(bold("evidence"));
    for (const auto& e : job.verdict.evidence) lines.push_back(clip("  - " + e, W));
  }
  lines.emplace_back();
  lines.push_back(clip(view.final_frame         ? "finished"
                       : !view.stopping.empty() ? view.stopping
                                                : "q or Ctrl-C quits (then prints the full report)",
                       W));

  const size_t H = static_cast<size_t>(std::max(5, view.height));
  if (lines.size() > H) lines.resize(H);
  std::string o;
  for (const auto& l : lines) o += l + "\n";
  return o;
}

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
    for (;;) {
      if (auto st = s.poll(); !st) return st.error();
      if (int sig = signal ? signal->exchange(0) : 0) s.request_stop(sig, "signal " + signal_name(sig));
      if (term.in_tty() && quit_pressed()) s.request_stop(SIGTERM, "quit");
      if (s.done()) break;
      auto now = std::chrono::steady_clock::now();
      if (now >= next_frame) {
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
        std::string frame = render_top_frame(*snap, view, state);
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
      std::this_thread::sleep_for(std::chrono::milliseconds(o.drain_ms));
    }
  }  // terminal restored here, before the final report is printed
  return s.finish();
}

}  // namespace steptrace
