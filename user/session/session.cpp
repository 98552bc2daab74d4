// SPDX-License-Identifier: Apache-2.0
#include "session/session.h"

#include <malloc.h>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <filesystem>
#include <thread>

#include "loader/preflight.h"
#include "session/container_target.h"
#include "loader/tracer_setup.h"
#include "steptrace_abi.h"
#include "util/log.h"
#include "capture/user_note.h"
#include "pipeline/clock_notes.h"
#include "pipeline/process_notes.h"
#include "util/proc_identity.h"
#include "util/self_usage.h"
#include "util/text.h"
#include "util/version.h"

namespace steptrace {

namespace {

// Every tgid in a cgroup v2 subtree (cgroup.procs of each directory).
std::vector<uint32_t> cgroup_tgids(const std::string& path) {
  std::vector<uint32_t> out;
  std::error_code ec;
  auto add = [&](const std::filesystem::path& dir) {
    if (auto s = read_small_file((dir / "cgroup.procs").string(), 16 << 20)) {
      auto v = parse_pid_list(*s);
      out.insert(out.end(), v.begin(), v.end());
    }
  };
  add(path);
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) add(it->path());
  }
  return out;
}

}  // namespace

Session::~Session() = default;

std::optional<pid_t> Session::job_pid() const {
  if (job_) return job_->pid();
  return std::nullopt;
}

// The filter mode for the kernel's target set and the processes to put in it
// before tracing starts (a launched job is added when it is spawned).
// --pod and --container become the cgroup (or the pids) they resolve to.
static Result<std::vector<uint32_t>> choose_targets(Options& o, const SysRoot& root, TracerSettings& ts) {
  std::vector<uint32_t> seed;
  if (!o.target.pod.empty() || !o.target.container.empty()) {
    auto t = resolve_container_target(o.target, root);
    if (!t) return t.error();
    o.target = *t;
  }
  if (!o.argv.empty()) {  // run, or record -- CMD: the job is added when it is spawned
    ts.filter_mode = ST_FILTER_TGID;
  } else if (o.target.all) {
    ts.filter_mode = ST_FILTER_ALL;
  } else if (!o.target.cgroup_path.empty()) {
    struct stat st {};
    if (::stat(o.target.cgroup_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return make_error(fmt::format("--cgroup {}: not a cgroup directory ({})", o.target.cgroup_path,
                                    std::strerror(errno)));
    ts.filter_mode = ST_FILTER_CGROUP;
    ts.cgroup_id = st.st_ino;  // cgroup v2: the directory's inode number is the cgroup id
    seed = cgroup_tgids(o.target.cgroup_path);
  } else {
    ts.filter_mode = ST_FILTER_TGID;
    for (uint32_t pid : o.target.pids) {
      if (!root.pid_exists(pid)) return make_error(fmt::format("no such process: {}", pid));
      seed.push_back(pid);
    }
    // The processes each PID has already started (a launcher's ranks and
    // their loaders): new ones are followed by the fork hook, these are not.
    if (o.follow_forks) {
      auto desc = root.descendants_of(o.target.pids);
      if (!desc.empty())
        log::info("following {} running descendant process(es) of {}", desc.size(), fmt::join(o.target.pids, ","));
      for (uint32_t pid : desc)
        if (std::find(seed.begin(), seed.end(), pid) == seed.end()) seed.push_back(pid);
    }
  }
  return seed;
}

// Read once at the start: where the data comes from, and the wall-clock anchor.
static Provenance read_provenance(const std::string& proc_root, const std::string& kernel, const ClockAnchor& anchor) {
  Provenance p;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  p.host = host_string(host);
  p.kernel = kernel;
  p.recorded_by = kVersion;
  if (auto b = read_small_file(proc_root + "/sys/kernel/random/boot_id", 64)) {
    std::string_view v = *b;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
    p.boot_id = host_string(v);
  }
  p.realtime_minus_monotonic_ns = anchor.offset_ns();
  return p;
}

// Trace the processes there at the start, each with its identity and
// parent (from /proc: their forks happened before tracing began).
Status Session::add_seeds(const SysRoot& root, const std::vector<uint32_t>& seed) {
  // Who started each running target: a rank's loader workers are its
  // children, and their forks happened before tracing began.
  const std::map<uint32_t, ProcStat> running = root.processes();
  auto add_seed = [&](uint32_t pid) -> Status {
    note_identity(pid);
    if (auto it = running.find(pid); it != running.end() && it->second.ppid)
      emit_note(pid, parent_note(it->second.ppid));
    note_new_process(pid);
    if (auto st = tracer_->add_target(pid); !st) return st.error();
    for (uint32_t tid : root.threads_of(pid))
      if (auto c = root.thread_comm(pid, tid)) pipe_.analysis().threads.set_comm(pid, tid, *c);
    return Ok{};
  };
  for (uint32_t pid : seed)
    if (auto st = add_seed(pid); !st) return st.error();
  if (!opts_.target.pids.empty() && opts_.follow_forks) {
    // Forked between the /proc scan and add_target of their parent: the fork
    // hook did not know the parent yet. Once more, now that it does.
    for (uint32_t pid : root.descendants_of(opts_.target.pids))
      if (std::find(seed.begin(), seed.end(), pid) == seed.end())
        if (auto st = add_seed(pid); !st) return st.error();
  }
  return Ok{};
}

// Device counters: sampled on every drain tick, and the drain wakes when a
// sample is due (the datastore words are last-value per execution, so each
// must be read before the next one: every 10 ms).
void Session::start_device_signals(const Options& o, const SysRoot& root) {
  signals::SignalsConfig sc;
  sc.enabled = o.device_counters;
  sc.sysfs_root = o.sysfs_root;
  sc.dev_root = o.dev_root;
  sc.proc_root = root.proc();
  signals_ = std::make_unique<signals::DeviceSignals>(sc);
  pipe_.analysis().device_signals = &signals_->data();
  pipe_.set_fold_observer([this](uint64_t keep_from) {
    signals_->forget_before(keep_from);
    // The fold freed a window's worth (and its analysis copy): hand it back
    // to the system, or the allocator keeps the high-water mark of every
    // window and RSS swings by a window each fold.
    ::malloc_trim(0);
  });
}

Result<std::unique_ptr<Session>> Session::start(const Options& o, const SysRoot& root) {
  std::unique_ptr<Session> s(new Session());
  s->opts_ = o;
  s->hang_ = HangWatch(HangOptions{o.hang_after_s});
  s->root_ = root;
  s->features_ = probe_features(o.btf_path);
  // record: refuse an existing capture file before anything is loaded.
  if (!o.record_path.empty())
    if (auto st = check_capture_path(o.record_path, o.force); !st) return st.error();

  // Preflight: refuse early with the actionable reason.
  if (auto st = check_preflight(s->features_, root.proc()); !st) return st.error();

  TracerSettings ts;
  ts.subsystems = o.subsystems;
  ts.sample_hz = o.sample_hz;
  ts.follow_forks = o.follow_forks;
  ts.ring_bytes = static_cast<uint64_t>(o.ring_mib) << 20;
  ts.ring_wake_fill = o.ring_wake_pct / 100.0;  // the drain sleeps on the ring's fd (DrainWait)
  ts.btf_path = o.btf_path;
  ts.allow_kprobes = o.allow_kprobes;
  ts.syscall_events = o.syscall_events;
  ts.max_targets = o.max_targets;
  ts.max_socks = o.max_socks;
  s->dev_files_ = DevFileSet(o.accel_devs, o.rdma_devs);
  set_devices(ts, find_host_devices(root), s->dev_files_);

  const bool launch = !o.argv.empty();  // run, or record -- CMD
  auto seeds = choose_targets(s->opts_, root, ts);
  if (!seeds) return seeds.error();
  const std::vector<uint32_t> seed = std::move(*seeds);
  s->seed_count_ = seed.size();

  // Validate --accel-dev / --rdma-dev before loading anything.
  if (auto st = s->dev_files_.validate(); !st) return st.error();

  auto tracer = BpfTracer::create(ts, s->features_);
  if (!tracer) return tracer.error();
  s->tracer_ = std::move(*tracer);
  s->report_.tiers = s->tracer_->tiers();
  s->report_.ring_mib = o.ring_mib;
  s->report_.drain_ms = o.drain_ms;
  s->pipe_.set_windows(WindowPolicy::from(o.window_s, o.max_memory_bytes, o.keep_steps));

  auto reader = RingReader::create(s->tracer_->ring_map_fd(), ts.ring_bytes,
                                   [sp = s.get()](const void* d, size_t n) { sp->on_record(d, n); });
  if (!reader) return reader.error();
  s->reader_ = std::move(*reader);
  // What a fold may keep: four rings, at least 256 MiB (a small ring is for the producers' cache);
  // drained every 10 ms at most (no fill wake-up reaches it while a fold holds the drain thread).
  s->keeper_ = std::make_unique<RingKeeper>(*s->reader_, ts.ring_bytes, std::max<uint64_t>(4 * ts.ring_bytes, 256ull << 20), std::min<uint32_t>(o.drain_ms, 10));
  s->pipe_.set_fold_guard([sp = s.get()](bool folding) {
    if (folding)
      sp->keeper_->hold();
    else
      sp->keeper_->release();
  });
  if (auto w = DrainWait::create(s->tracer_->ring_map_fd(), o.drain_ms, kIdleDrainMs); w) {
    s->wait_ = std::move(*w);
    // Device files not there yet wake the sleep when they appear: ioctls on
    // one before it is known are not seen (a simulated device is mounted by
    // the job and used at once).
    s->wait_->watch_paths(s->dev_files_.pending_paths());
    s->watching_devs_ = s->dev_files_.pending();
  } else {
    log::warn("drains on a fixed {} ms timer: {}", o.drain_ms, w.error().message);
  }
  // A new program image may load the runtime library or the step marker.
  // Stack samples: their processes' maps are read on the symbol worker.
  if ((o.subsystems & ST_SUB_SAMPLE) && o.sample_hz)
    s->symbols_ = std::make_unique<SymbolWorker>(
        root, [t = s->tracer_.get()](uint32_t pid, const st_py_proc* layout) { t->set_python(pid, layout); });
  s->pipe_.set_observer([sp = s.get()](const st_event_header& h, const void* data, size_t len) {
    if (h.kind == ST_EV_TASK_EXEC) {
      sp->note_identity(h.pid);
      sp->note_new_process(h.pid);
      if (sp->symbols_) sp->symbols_->exec(h.pid);
    }
    if (h.kind == ST_EV_CPU_SAMPLE && sp->symbols_) sp->symbols_->sampled(h.pid, data, len);
    if (h.kind == ST_EV_ACCEL_IOCTL) sp->note_device_call(h.pid);
    if (h.kind == ST_EV_TASK_EXIT && exit_ends_process(data, len)) sp->device_call_rescans_.forget(h.pid);
  });
  // Found before the job's first device call: the exec is drained at once.
  s->exec_wake_ = (o.subsystems & ST_SUB_UPROBE) && o.discover_libs && !o.target.all;

  if (auto st = s->dev_files_.resolve(*s->tracer_, true); !st) return st.error();

  if (o.subsystems & ST_SUB_UPROBE) {
    for (const auto& lib : o.runtime_libs) s->attach_lib(lib);
    if (launch && o.discover_libs)
      for (const auto& lib : resolve_needed_libs(o.argv.front())) s->attach_lib(lib);
  }
  if (auto st = s->add_seeds(root, seed); !st) return st.error();

  s->start_device_signals(o, root);
  s->start_mono_ns_ = monotonic_ns();
  s->start_cpu_s_ = self_cpu_times().total();
  // The first clock anchor is the header's wall-clock offset too.
  s->report_.source = read_provenance(root.proc(), s->features_.release, s->note_clock_anchor());
  if (!o.record_path.empty()) {
    auto w = CaptureWriter::create(o.record_path, s->capture_meta(), {o.max_capture_bytes, o.force});
    if (!w) return w.error();
    s->writer_ = std::move(*w);
    s->signals_->keep_new(true);  // the capture carries the device counters (pipeline/signal_notes.h)
  }
  if (launch)
    if (auto st = s->launch_job(root); !st) return st.error();
  return s;
}

// run, record -- CMD, top -- CMD: the job, held at its gate until it is a target.
Status Session::launch_job(const SysRoot& root) {
  // The job's output never mixes into a JSON stream or top's screen.
  int out_fd = -1, err_fd = -1, file_fd = -1;
  if (!opts_.job_output.empty()) {
    file_fd = ::open(opts_.job_output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (file_fd < 0) return make_error(fmt::format("--job-output {}: {}", opts_.job_output, std::strerror(errno)));
    out_fd = err_fd = file_fd;
  } else if (opts_.command == CommandKind::top) {
    file_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    out_fd = err_fd = file_fd;
  } else if (opts_.json_path == "-") {
    out_fd = 2;
  }
  auto child = GatedChild::spawn(opts_.argv, out_fd, err_fd);
  if (file_fd >= 0) ::close(file_fd);
  if (!child) return child.error();
  const auto pid = static_cast<uint32_t>(child->pid());
  if (auto st = tracer_->add_target(pid); !st) return st.error();
  note_new_process(pid);
  if (auto st = child->release(); !st) return st.error();
  JobControlSettings js;
  js.kill_after_ns = static_cast<uint64_t>(opts_.kill_after_s * 1e9);
  js.keep_running = opts_.keep_running;
  js.subreaper = opts_.subreaper;
  job_.emplace(std::move(*child), js, root);
  return Ok{};
}

nlohmann::json Session::capture_meta() const {
  nlohmann::json tiers = nlohmann::json::object();
  for (const auto& t : report_.tiers) tiers[t.collector] = t.tier;
  const Provenance& p = report_.source;
  return {{"host", p.host},
          {"kernel", p.kernel},
          {"steptrace_version", p.recorded_by},
          {"boot_id", p.boot_id},
          {"abi_version", ST_ABI_VERSION},
          {"argv", opts_.argv},
          {"pids", opts_.target.pids},
          {"accel_devs", opts_.accel_devs},
          {"rdma_devs", opts_.rdma_devs},
          {"subsystems", opts_.subsystems},
          {"ring_mib", opts_.ring_mib},
          {"drain_ms", opts_.drain_ms},
          {"attach_tiers", tiers},
          // Wall time = monotonic + this offset (BPF timestamps are CLOCK_MONOTONIC).
          {"realtime_minus_monotonic_ns", p.realtime_minus_monotonic_ns},
          {"window_start_ns", monotonic_ns()}};
}

void Session::on_record(const void* data, size_t len) {
  if (writer_ && !write_failed_) {
    if (auto st = writer_->append(data, len); !st) {
      // The writer stopped (--max-size, or a failed write): one line now;
      // run_loop ends the session as at the end of -d.
      write_failed_ = true;
      if (writer_->end_reason() == "max_size")
        log::warn("{}", st.error().message);
      else
        log::error("{}", st.error().message);
    }
  }
  pipe_.push(data, len);
}

Status Session::poll() {
  // Device files first: a simulated device's first ioctls follow its mount closely.
  if (auto s = dev_files_.resolve(*tracer_, false); !s) return s;
  if (monotonic_ns() >= next_clock_anchor_ns_) note_clock_anchor();
  flush_notes();
  auto n = reader_->drain();
  if (!n) return n.error();
  if (tracer_->rearm_fill_wakeup()) ++fill_wakeups_;
  drained_since_drop_check_ += *n;
  check_drops();
  if (exec_wake_) tracer_->arm_exec_wakeup();
  last_drained_ = *n;
  pipe_.advance();
  // Records the keeper drained while a fold ran: after those of this drain
  // (ring order), delivered by the next advance.
  if (const size_t kept = keeper_->replay([this](const void* d, size_t len) { on_record(d, len); })) {
    last_drained_ += kept;
    drained_since_drop_check_ += kept;
  }
  if (!scan_.empty()) scan_for_libs();
  if (signals_) {
    std::vector<uint32_t> pids;
    const Analysis& a = pipe_.analysis();
    for (const auto& [key, t] : a.threads.threads())
      if (t.pid == key) pids.push_back(t.pid);  // live main threads
    // Processes that drove an accelerator are the ones with a datastore: served first.
    std::set<uint32_t> accel;
    for (const auto& [tid_cmd, agg] : a.collectors.accel_by_tid_cmd)
      if (const ThreadInfo* t = a.threads.find(tid_cmd.first)) accel.insert(t->pid);
    signals_->tick(monotonic_ns(), pids, accel);
    write_signal_notes(false);
  }
  return Ok{};
}

Status Session::run_loop(std::atomic<int>* signal) {
  for (;;) {
    sleep_before_drain();
    if (auto s = poll(); !s) return s;
    if (int sig = signal ? signal->exchange(0) : 0) request_stop(sig, "signal " + signal_name(sig));
    // Recording stopped (--max-size, a full disk): nothing more would be kept,
    // so the session ends as at the end of -d.
    if (write_failed_) request_stop(SIGTERM, writer_->end_reason() == "max_size" ? "max_size" : "capture write error");
    if (done()) break;
    check_hang();
    if (ticker_ && monotonic_ns() - last_tick_ns_ >= 1'000'000'000ull) {
      last_tick_ns_ = monotonic_ns();
      ticker_();
    }
  }
  return Ok{};
}

Result<SessionReport> Session::finish() {
  if (finished_) return make_error("session already finished");
  finished_ = true;
  if (job_ && !done()) {
    // Ended before the job did (an error, or a caller that stopped polling):
    // stop it properly, tracing while it shuts down, unless it is to keep running.
    if (!opts_.keep_running) request_stop(SIGTERM, end_reason_.empty() ? "ended" : end_reason_);
    while (!done()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(opts_.drain_ms));
      if (auto s = poll(); !s) break;
    }
  }
  if (auto s = poll(); !s) return s.error();
  note_clock_anchor();  // the last anchor: the recording's wall-clock span is bounded at both ends
  write_signal_notes(true);
  flush_notes();
  pipe_.flush();
  uint64_t end = monotonic_ns();
  report_.window_start_ns = start_mono_ns_;
  report_.window_end_ns = end;
  pipe_.name_threads(root_);
  report_.records = pipe_.records();
  report_.decode = pipe_.decode_stats();
  report_.late_records = pipe_.late();
  report_.windows = pipe_.window_stats();
  const RingKeeperStats& ks = keeper_->stats();
  log::debug("ring kept during {} folds: {} records, at most {} bytes at once, longest fold {:.0f} ms, {} drains skipped at the cap",
             ks.holds, ks.records, ks.peak_bytes, ks.longest_hold_ns / 1e6, ks.full);
  log::debug("{} drains woken early by a ring {} % full", fill_wakeups_, opts_.ring_wake_pct);
  auto drops = tracer_->read_stats();
  if (!drops) return drops.error();
  report_.drops = *drops;
  report_.job = pipe_.close(end, report_.drops);
  report_.analysis = pipe_.take_analysis();
  report_.analysis.device_signals = nullptr;  // the sampler's data stays with the session
  if (symbols_) {
    symbols_->name_stacks(report_.analysis.samples);
    // After every record: a replay names the frames as this report does.
    if (writer_ && !write_failed_)
      for (const auto& note : symbol_notes(report_.analysis.samples))
        if (auto rec = make_user_note(end, 0, note); !rec.empty()) (void)writer_->append(rec.data(), rec.size());
  }
  if (writer_) {
    // Whatever happened to the file, the report is still printed: marked
    // INCOMPLETE with the reason, and a write failure makes the exit non-zero.
    // A hang-up (an ssh session that went away) is not how a recording is
    // meant to end: the capture says so and the exit is non-zero. SIGINT and
    // SIGTERM are the usual ways to stop one.
    const bool hangup = end_reason_ == "signal SIGHUP";
    auto st = writer_->close(report_.drops, end, hangup ? end_reason_ : std::string(kCaptureComplete));
    std::string how = writer_->stopped() ? std::string(writer_->end_reason())
                      : hangup           ? end_reason_
                                         : std::string(kCaptureComplete);
    if (how != kCaptureComplete) report_.capture_end = how;
    if (writer_->stopped() && how != "max_size") report_.capture_error = how;
    if (hangup && !writer_->stopped()) report_.capture_error = "recording interrupted by SIGHUP";
    if (!st) {
      log::error("{}", st.error().message);
      report_.capture_error = st.error().message;
      if (report_.capture_end.empty()) report_.capture_end = st.error().message;
    }
    mark_capture_end(report_);
  }
  mark_window_losses(report_);
  report_.tracer_cpu_s = self_cpu_times().total() - start_cpu_s_;
  report_.wall_s = static_cast<double>(end - start_mono_ns_) / 1e9;
  for (auto& w : dev_files_.never_appeared()) report_.warnings.push_back(std::move(w));
  if (job_) {
    if (!job_->exit_status()) job_->detach();  // --keep-running: left as it is
    report_.job_exit_code = job_->exit_status().value_or(-1);
    report_.job_outcome = job_->outcome();
  }
  report_.end_reason = end_reason_.empty() ? "ended" : end_reason_;
  hang_.close(report_.job);
  report_.hangs = hang_.done();
  return std::move(report_);
}


}  // namespace steptrace
