// SPDX-License-Identifier: Apache-2.0
#include "daemon/daemon.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "loader/ring_reader.h"
#include "cli/options.h"
#include "daemon/budget.h"
#include "daemon/config.h"
#include "daemon/discovery.h"
#include "daemon/exposition.h"
#include "daemon/flight_recorder.h"
#include "loader/dev_files.h"
#include "loader/features.h"
#include "loader/preflight.h"
#include "loader/tracer.h"
#include "pipeline/pipeline.h"
#include "session/session.h"
#include "steptrace_abi.h"
#include "util/version.h"
#include "util/log.h"
#include "util/sys_root.h"

namespace steptrace::daemon {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
std::atomic<bool> g_dump{false};

void on_stop(int) { g_stop.store(true); }
void on_hup(int) { g_reload.store(true); }
void on_usr1(int) { g_dump.store(true); }

constexpr double kBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
constexpr size_t kNumBuckets = sizeof(kBuckets) / sizeof(kBuckets[0]);
constexpr size_t kStepHistory = 4096;   // step durations kept for the p99 of the auto-dump trigger
constexpr size_t kMinHistory = 100;     // no automatic dump before this many steps
constexpr int kMaxDumpFiles = 16;       // oldest flight-recorder captures are removed
constexpr double kManualDumpMinS = 5;   // SIGUSR1 / POST /dump rate limit

struct CpuTimes {
  double user = 0, sys = 0;
};
CpuTimes rusage_self() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6,
          static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6};
}

uint64_t rss_bytes() {
  auto s = read_small_file("/proc/self/statm", 4096);
  if (!s) return 0;
  unsigned long size = 0, res = 0;
  if (std::sscanf(s->c_str(), "%lu %lu", &size, &res) != 2) return 0;
  return static_cast<uint64_t>(res) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

double now_s() { return static_cast<double>(monotonic_ns()) / 1e9; }

struct RankSeries {
  std::string job, rank, pid;
  uint32_t pid_num = 0;
  std::array<double, kCategories> cat_s{};
  std::array<uint64_t, kNumBuckets> buckets{};
  double sum_s = 0;
  uint64_t count = 0;
  uint64_t straggler_steps = 0;
  // EFA control path (uverbs calls), inside steps and outside them.
  uint64_t efa_calls[2] = {};
  double efa_s[2] = {};
  uint64_t last_window = 0;
};

// In-kernel per-process counters (levels aggregated and up), as exported.
struct ProcAggSeries {
  std::string job, rank, pid;
  st_proc_agg base{};  // counts of replaced tracers and of keys already deleted
  st_proc_agg cur{};   // base + the live map's value
  double gone_at_s = 0;  // when the process was found gone; 0 while alive
};

st_proc_agg operator+(const st_proc_agg& a, const st_proc_agg& b) {
  return {a.oncpu_ns + b.oncpu_ns,
          a.runq_wait_ns + b.runq_wait_ns,
          a.switches + b.switches,
          a.involuntary + b.involuntary,
          a.net_send_bytes + b.net_send_bytes,
          a.net_recv_bytes + b.net_recv_bytes,
          a.block_read_bytes + b.block_read_bytes,
          a.block_write_bytes + b.block_write_bytes,
          a.block_rqs + b.block_rqs};
}

struct DumpRequest {
  std::string reason;
  bool done = false;
  int http_status = 0;
  std::string message;
};

class Daemon {
 public:
  Daemon(DaemonConfig cfg, int argc, char** argv) : cfg_(std::move(cfg)), argc_(argc), argv_(argv),
      flight_(0, 0), budget_(cfg_.max_cpu_percent) {}
  ~Daemon();
  Status start();
  int run();

 private:
  Status build_tracer();
  void drop_tracer();
  void apply_level(int level, const char* why);
  void enter_level(int level);
  uint32_t wanted_subsystems() const;
  bool detail_wanted() const;
  void apply_detail();
  void read_aggregates(bool tracer_going);
  void on_record(const void* data, size_t len);
  void on_raw_record(const st_event_header& h, const void* data, size_t len);  // pipeline observer
  void resolve_accel_devs(bool first_time);
  void discover();
  void track(uint32_t pid, bool log_it);
  bool add_target(uint32_t pid);
  void retry_untraced();
  void note_new_process(uint32_t pid);
  void note_parent(uint32_t child, uint32_t parent);
  void seed_parents();
  void scan_for_libs();
  void attach_lib(const std::string& path);
  void close_window(uint64_t now, const char* reason);
  void publish(const JobAnalysis& ja, bool detail);
  void sample_cpu();
  void render_metrics();
  void reload();
  void apply_runtime_config();
  void handle_dumps();
  Result<std::string> dump(const std::string& reason);
  Status prepare_dump_dir();
  nlohmann::json capture_meta(const std::string& reason) const;
  DropStats cumulative_drops() const;
  void start_http(const std::string& host, int port, int* fd_ok);

  DaemonConfig cfg_;
  int argc_;
  char** argv_;
  std::string host_;
  KernelFeatures features_;
  uint32_t neuron_major_ = 0;
  uint32_t uverbs_major_ = 0;
  uint32_t base_subsystems_ = 0;
  uint32_t active_subsystems_ = 0;
  uint32_t drain_ms_ = 10;

  std::unique_ptr<BpfTracer> tracer_;
  std::unique_ptr<RingReader> reader_;
  int stats_fd_ = -1;
  Pipeline pipe_;             // decode -> reorder -> analysis, one window at a time
  bool window_open_ = false;  // a window is being gathered (from the first tracer on)
  uint64_t window_start_ns_ = 0, window_no_ = 0;
  // Per-event detail was on for the whole current window (sampled: 1 of
  // every sample_every windows since the level was entered).
  bool window_detail_ = true;
  bool bpf_detail_ = false;        // what the current tracer's programs were told
  bool detail_since_sample_ = true;  // some window since the last CPU sample had detail
  uint64_t detail_since_ns_ = 0;   // when they last turned detail on
  DetailCycle cycle_;
  int applied_level_ = 0;
  uint64_t detail_windows_[2] = {0, 0};  // closed windows without / with detail
  std::map<uint32_t, ProcAggSeries> agg_;
  DropStats drops_window_start_{};
  // Processes the kernel's target set refused (add_target failed): counted
  // once per pid, by cause, retried at every discovery scan while they live.
  std::set<uint32_t> untraced_;
  std::map<std::string, uint64_t> target_add_failures_;  // cause -> processes refused
  uint64_t target_add_failed_total_ = 0, window_target_add_failed_ = 0;
  bool window_incomplete_ = false;  // the last closed window had drops or losses
  int exit_code_ = 0;               // non-zero: stopped because it could not trace
  DropStats drops_base_{};           // counters of tracers that were replaced
  double bpf_base_s_ = 0;
  std::map<std::string, double> prog_base_s_;
  DevFileSet dev_files_;

  ProcScanner scanner_;
  std::map<uint32_t, ProcIdentity> tracked_;  // accelerator holders and their followed descendants' roots
  std::map<uint32_t, ProcIdentity> identity_cache_;
  // Fork relations of traced processes. Each window's Analysis starts empty, and
  // analyze_job finds a rank's DataLoader workers through them: they are replayed
  // into every new window as fork events.
  std::map<uint32_t, uint32_t> parents_;
  LibScanQueue lib_scan_;
  std::set<std::string> probed_libs_;
  std::vector<std::string> known_libs_;  // re-attached when the tracer is rebuilt
  uint64_t next_discover_ns_ = 0;

  FlightRecorder flight_;
  BudgetController budget_;
  double last_cpu_total_ = 0, last_sample_s_ = 0;
  CpuTimes cpu_{};
  double bpf_now_s_ = 0;

  std::map<std::string, RankSeries> series_;
  std::deque<double> step_history_;
  Verdict verdict_;
  bool have_verdict_ = false;
  struct Straggler {
    std::string job, rank, pid;
    int rank_num = -1;
  } straggler_;

  // Counters.
  uint64_t discovered_total_ = 0, degradations_ = 0, windows_total_ = 0;
  std::map<std::string, uint64_t> cap_hits_, dumps_ok_, window_closes_;
  uint64_t dump_failures_ = 0, reload_ok_ = 0, reload_err_ = 0;
  double last_auto_dump_s_ = -1e18, last_manual_dump_s_ = -1e18;

  // HTTP.
  std::unique_ptr<httplib::Server> http_;
  std::thread http_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string metrics_text_;
  std::deque<std::shared_ptr<DumpRequest>> dump_queue_;
};

Daemon::~Daemon() {
  if (http_) http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  if (stats_fd_ >= 0) ::close(stats_fd_);
}

uint32_t Daemon::wanted_subsystems() const {
  uint32_t s = base_subsystems_;
  int lvl = budget_.level();
  if (lvl >= kLevelNoNet) s &= ~static_cast<uint32_t>(ST_SUB_NET);
  if (lvl >= kLevelNoBlock) s &= ~static_cast<uint32_t>(ST_SUB_BLOCK);
  if (lvl >= kLevelNoSched) s &= ~static_cast<uint32_t>(ST_SUB_SCHED);
  if (lvl >= kLevelPaused) s = 0;
  return s;
}

bool Daemon::detail_wanted() const { return cycle_.detail(budget_.level(), cfg_.sample_every); }

// At the start of every window: the BPF switches for the level and the
// window's place in the sampling cycle.
void Daemon::apply_detail() {
  window_detail_ = detail_wanted();
  if (!tracer_) return;
  if (window_detail_ && !bpf_detail_) detail_since_ns_ = monotonic_ns();
  bpf_detail_ = window_detail_;
  detail_since_sample_ = detail_since_sample_ || window_detail_;
  tracer_->set_detail(window_detail_);
  tracer_->set_aggregate(budget_.level() >= kLevelAggregated);
}

void Daemon::enter_level(int level) {
  applied_level_ = level;
  drain_ms_ = level >= kLevelSlowDrain ? std::max<uint32_t>(cfg_.drain_ms * 10, 100) : cfg_.drain_ms;
  // Sampled costs most in its detailed windows: judge it over a whole cycle.
  budget_.set_window(level == kLevelSampled
                         ? std::max(BudgetController::kWindowS, cfg_.window_s * static_cast<double>(cfg_.sample_every))
                         : BudgetController::kWindowS);
}

void Daemon::read_aggregates(bool tracer_going) {
  std::map<uint32_t, st_proc_agg> live;
  if (tracer_) {
    if (auto m = tracer_->read_proc_agg()) live = std::move(*m);
    else log::debug("aggregation map: {}", m.error().message);
  }
  double now = now_s();
  for (const auto& [tgid, v] : live) {
    auto it = agg_.find(tgid);
    if (it != agg_.end() && it->second.gone_at_s > 0) {
      agg_.erase(it);  // the pid was reused: a new process, a new series
      it = agg_.end();
    }
    if (it == agg_.end()) {
      ProcIdentity id;
      if (auto c = identity_cache_.find(tgid); c != identity_cache_.end()) id = c->second;
      else id = scanner_.identity(tgid);
      ProcAggSeries s;
      s.job = id.job;
      s.rank = id.rank;
      s.pid = std::to_string(tgid);
      it = agg_.emplace(tgid, std::move(s)).first;
    }
    ProcAggSeries& s = it->second;
    s.cur = s.base + v;
    if (tracer_going) {
      s.base = s.cur;  // the next tracer's map starts from zero
    } else if (!scanner_.alive(tgid)) {
      // Exited (reaped: every thread has left its CPU for good). Keep the
      // final counts in userspace for a while, free the kernel's key now.
      s.base = s.cur;
      s.gone_at_s = now;
      tracer_->forget_proc_agg(tgid);
    }
  }
  // Series whose key is gone (tracer rebuilt, or paused) end when the process does.
  for (auto& [tgid, s] : agg_)
    if (s.gone_at_s == 0 && !live.count(tgid) && !scanner_.alive(tgid)) s.gone_at_s = now;
  const double keep_s = std::max(10.0, 2 * cfg_.window_s);
  for (auto it = agg_.begin(); it != agg_.end();) {
    if (it->second.gone_at_s > 0 && now - it->second.gone_at_s > keep_s) it = agg_.erase(it);
    else ++it;
  }
}

Status Daemon::start() {
  host_ = cfg_.host.empty() ? hostname() : cfg_.host;
  pipe_.set_observer([this](const st_event_header& h, const void* d, size_t n) { on_raw_record(h, d, n); });
  features_ = probe_features(cfg_.btf_path);
  auto lockdown = read_small_file("/sys/kernel/security/lockdown");
  auto rows = run_preflight(features_, read_capabilities(), parse_lockdown(lockdown.value_or("")));
  for (const auto& r : rows)
    if (r.status == CheckStatus::fail)
      return make_error(fmt::format("cannot trace: {}: {} ({})", r.name, r.detail, r.hint));
  base_subsystems_ = *parse_subsystems(cfg_.collectors);
  neuron_major_ = SysRoot().char_major("neuron").value_or(0);
  if (neuron_major_) log::info("found Neuron devices: char major {}", neuron_major_);
  uverbs_major_ = SysRoot().char_major("infiniband_verbs").value_or(0);
  if (uverbs_major_) log::info("found RDMA verbs devices (EFA control path): char major {}", uverbs_major_);
  apply_runtime_config();
  // A configured floor: start there (a cheap mode from the first window).
  budget_.set_floor(level_by_name(cfg_.degrade_level));
  enter_level(budget_.level());
  cycle_.restart();
  if (budget_.level() > 0)
    log::info("starting at degradation level {} '{}' (degrade_level): {}", budget_.level(),
              kLevels[budget_.level()].name, kLevels[budget_.level()].what);

  // BPF run-time statistics: the kernel counts only while this fd is open.
  stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (stats_fd_ < 0) log::warn("cannot enable BPF run-time stats ({}); BPF CPU is not measured", std::strerror(errno));

  if (auto s = build_tracer(); !s) return s;
  if (auto s = prepare_dump_dir(); !s) log::warn("{}", s.error().message);

  auto listen = split_listen(cfg_.listen);
  if (!listen) return listen.error();
  if (listen->first != "127.0.0.1" && listen->first != "::1" && listen->first != "localhost")
    log::warn("metrics endpoint listens on {} (not loopback): anyone who can reach it can read metrics and request dumps",
              cfg_.listen);
  http_ = std::make_unique<httplib::Server>();
  auto& svr = *http_;
  svr.new_task_queue = [] { return new httplib::ThreadPool(2); };
  svr.set_payload_max_length(1024);
  svr.set_read_timeout(5, 0);
  svr.set_write_timeout(5, 0);
  svr.set_keep_alive_max_count(20);
  svr.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    // Only two methods, small requests, no request bodies.
    // (Runs before the body is read: refuse any request that announces one.)
    const auto cl = req.get_header_value("Content-Length");
    if ((req.method != "GET" && req.method != "HEAD" && req.method != "POST") || (!cl.empty() && cl != "0") ||
        req.has_header("Transfer-Encoding") || req.target.size() > 256) {
      res.status = 400;
      res.set_content("bad request\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lk(mu_);
    res.set_content(metrics_text_, "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("steptrace daemon\nGET /metrics  Prometheus metrics\nPOST /dump    flight-recorder capture\n",
                    "text/plain");
  });
  svr.Post("/dump", [this](const httplib::Request&, httplib::Response& res) {
    auto req = std::make_shared<DumpRequest>();
    req->reason = "http";
    std::unique_lock<std::mutex> lk(mu_);
    dump_queue_.push_back(req);
    if (!cv_.wait_for(lk, std::chrono::seconds(30), [&] { return req->done; })) {
      res.status = 503;
      res.set_content("dump timed out\n", "text/plain");
      return;
    }
    res.status = req->http_status;
    res.set_content(req->message + "\n", "text/plain");
  });
  if (!svr.bind_to_port(listen->first, listen->second))
    return make_error(fmt::format("cannot listen on {}: {}", cfg_.listen, std::strerror(errno)));
  http_thread_ = std::thread([this] {
    // Signals go to the main thread.
    sigset_t set;
    sigfillset(&set);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    http_->listen_after_bind();
  });
  log::info("serving Prometheus metrics on http://{}/metrics", cfg_.listen);
  return Ok{};
}

void Daemon::apply_runtime_config() {
  log::set_level(cfg_.verbose >= 2 ? log::Level::debug : cfg_.verbose == 1 ? log::Level::info : log::Level::warn);
  // Info is the floor for a daemon: journald keeps what it says.
  if (log::level() < log::Level::info) log::set_level(log::Level::info);
  budget_.set_budget(cfg_.max_cpu_percent);
  flight_.configure(static_cast<uint64_t>(cfg_.flight_seconds * 1e9), static_cast<uint64_t>(cfg_.flight_mib) << 20);
  std::vector<std::string> paths;
  for (const auto& p : cfg_.accel_devs) {
    std::error_code ec;
    auto canon = std::filesystem::weakly_canonical(p, ec);
    paths.push_back(ec ? p : canon.string());
  }
  scanner_.set_accel_paths(std::move(paths));
}

Status Daemon::build_tracer() {
  active_subsystems_ = wanted_subsystems();
  if (active_subsystems_ == 0) {
    log::warn("tracing paused (degradation level {})", kLevels[budget_.level()].name);
    return Ok{};
  }
  TracerSettings ts;
  ts.filter_mode = ST_FILTER_TGID;
  ts.follow_forks = true;
  ts.subsystems = active_subsystems_;
  ts.ring_bytes = static_cast<uint64_t>(cfg_.ring_mib) << 20;
  ts.btf_path = cfg_.btf_path;
  dev_files_ = DevFileSet(cfg_.accel_devs, cfg_.rdma_devs);
  ts.n_accel_devs = dev_files_.size();
  ts.neuron_major = neuron_major_;
  ts.uverbs_major = uverbs_major_;
  ts.rdma_verbs = uverbs_major_ != 0 || dev_files_.has_rdma();
  ts.agg_processes = ST_MAX_AGG_PROCS;
  ts.max_targets = cfg_.max_targets;
  auto tracer = BpfTracer::create(ts, features_);
  if (!tracer) return make_error(fmt::format("cannot trace: {}", tracer.error().message));
  tracer_ = std::move(*tracer);
  auto reader = RingReader::create(tracer_->ring_map_fd(), [this](const void* d, size_t n) { on_record(d, n); });
  if (!reader) return reader.error();
  reader_ = std::move(*reader);
  resolve_accel_devs(true);
  probed_libs_.clear();
  if (active_subsystems_ & ST_SUB_UPROBE) {
    for (const auto& lib : cfg_.runtime_libs) attach_lib(lib);
    auto libs = known_libs_;
    for (const auto& lib : libs) attach_lib(lib);
  }
  // Targets: the holders and every descendant they have now (the kernel follows new ones).
  for (const auto& [pid, id] : tracked_) {
    add_target(pid);
    for (auto [c, parent] : scanner_.descendants(pid)) {
      add_target(c);
      note_parent(c, parent);
    }
  }
  window_start_ns_ = monotonic_ns();
  pipe_.start_window();
  window_open_ = true;
  seed_parents();
  if (auto d = tracer_->read_stats()) drops_window_start_ = *d;
  apply_detail();
  return Ok{};
}

DropStats Daemon::cumulative_drops() const {
  DropStats d = drops_base_;
  if (tracer_)
    if (auto cur = tracer_->read_stats()) d += *cur;
  d.losses[ST_LOSS_TARGET_ADD] += target_add_failed_total_;
  return d;
}

void Daemon::drop_tracer() {
  if (!tracer_) return;
  read_aggregates(true);
  if (reader_) (void)reader_->drain();
  pipe_.flush();
  close_window(monotonic_ns(), "tracer_rebuild");
  if (auto cur = tracer_->read_stats()) drops_base_ += *cur;
  for (const auto& p : tracer_->prog_stats()) {
    prog_base_s_[p.name] += static_cast<double>(p.run_time_ns) / 1e9;
    bpf_base_s_ += static_cast<double>(p.run_time_ns) / 1e9;
  }
  reader_.reset();
  tracer_.reset();
  bpf_detail_ = false;
  pipe_.restart();
}

void Daemon::apply_level(int level, const char* why) {
  const auto& l = kLevels[level];
  cycle_.level_changed();
  std::string sampling =
      level == kLevelSampled ? fmt::format(" (N = {}: detail in 1 of every {} windows of {} s)", cfg_.sample_every,
                                           cfg_.sample_every, cfg_.window_s)
                             : "";
  log::warn("CPU budget: {} (tracer CPU {:.2f}% of one core, budget {:.2f}%): degraded to level {} '{}': {}{}", why,
            budget_.last_decision_percent(), budget_.budget_percent(), level, l.name, l.what, sampling);
  // A window never mixes detail policies: the one that ran under the old
  // level is closed (and published by its own rule) before the switch.
  auto mode = [](int lv) { return lv < kLevelSampled ? 0 : lv == kLevelSampled ? 1 : 2; };
  bool mode_changes = mode(level) != mode(applied_level_);
  enter_level(level);
  if (wanted_subsystems() != active_subsystems_) {
    drop_tracer();
    if (auto s = build_tracer(); !s) {
      // Nothing is traced any more: exit non-zero so that the service
      // manager (Restart=on-failure) starts a fresh daemon.
      log::error("tracer rebuild failed, stopping: {}", s.error().message);
      exit_code_ = kExitCannotTrace;
      g_stop.store(true);
    }
  } else if (mode_changes && window_open_) {
    if (reader_) (void)reader_->drain();
    pipe_.flush();
    close_window(monotonic_ns(), "level_change");
  }
}

void Daemon::resolve_accel_devs(bool first_time) {
  if (!tracer_) return;
  if (auto s = dev_files_.resolve(*tracer_, first_time); !s) log::warn("{}", s.error().message);
}

void Daemon::track(uint32_t pid, bool log_it) {
  if (tracked_.count(pid)) return;
  if (tracked_.size() >= cfg_.max_processes) {
    if (cap_hits_["processes"]++ == 0) log::warn("tracking cap reached ({} processes); ignoring new ones", cfg_.max_processes);
    return;
  }
  ProcIdentity id = scanner_.identity(pid);
  tracked_[pid] = id;
  identity_cache_[pid] = id;
  ++discovered_total_;
  if (tracer_) {
    add_target(pid);
    // Children forked before it opened the device (DataLoader workers) are not followed yet.
    for (auto [c, parent] : scanner_.descendants(pid)) {
      add_target(c);
      note_new_process(c);
      note_parent(c, parent);
    }
    seed_parents();
    SysRoot root;
    for (uint32_t tid : root.threads_of(pid))
      if (auto c = root.thread_comm(pid, tid)) pipe_.analysis().threads.set_comm(pid, tid, *c);
  }
  note_new_process(pid);
  if (log_it) log::info("tracing pid {} (job {}{}{})", pid, id.job, id.rank.empty() ? "" : ", rank ", id.rank);
}

// Adds `pid` to the kernel's target set. A refusal (the set is full) is
// never ignored: counted once per process and cause, logged once per cause,
// exported, retried at every discovery scan while the process lives, and the
// windows it misses are marked INCOMPLETE (close_window).
bool Daemon::add_target(uint32_t pid) {
  if (!tracer_) return false;
  int err = 0;
  auto st = tracer_->add_target(pid, &err);
  if (st) {
    untraced_.erase(pid);
    return true;
  }
  const std::string cause = err == E2BIG ? "map_full" : "error";
  if (untraced_.count(pid)) return false;  // already counted
  if (untraced_.size() < 65536) untraced_.insert(pid);
  ++target_add_failed_total_;
  ++window_target_add_failed_;
  if (target_add_failures_[cause]++ == 0)
    log::warn("{} ({}): processes refused are not traced, are counted in steptrace_target_add_failures_total and "
              "mark their windows incomplete; retried while they live",
              st.error().message, cause);
  return false;
}

void Daemon::retry_untraced() {
  if (!tracer_) return;
  for (auto it = untraced_.begin(); it != untraced_.end();) {
    uint32_t pid = *it++;
    if (!scanner_.alive(pid)) untraced_.erase(pid);
    else if (add_target(pid)) log::info("pid {} added to the target set after an earlier refusal", pid);
  }
}

void Daemon::note_parent(uint32_t child, uint32_t parent) {
  if (parents_.size() >= 65536 && !parents_.count(child)) {
    ++cap_hits_["processes"];
    return;
  }
  parents_[child] = parent;
}

void Daemon::seed_parents() {
  if (!window_open_) return;
  SysRoot root;
  for (const auto& [child, parent] : parents_) {
    st_task_new e{};
    e.hdr.size = sizeof(e);
    e.hdr.kind = ST_EV_TASK_NEW;
    e.hdr.ts_ns = window_start_ns_;
    e.hdr.pid = e.hdr.tid = parent;
    e.child_pid = e.child_tid = child;
    if (auto c = root.thread_comm(child, child)) std::strncpy(e.comm, c->c_str(), sizeof(e.comm) - 1);
    Event ev{e};
    pipe_.analysis().threads.on_event(ev);
    pipe_.analysis().timeline.on_event(ev);
  }
}

void Daemon::discover() {
  resolve_accel_devs(false);
  retry_untraced();
  for (auto it = parents_.begin(); it != parents_.end();) {
    if (!scanner_.alive(it->first)) it = parents_.erase(it);
    else ++it;
  }
  // Forget exited processes (the kernel side drops them from its target set at exit).
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (!scanner_.alive(it->first)) {
      log::info("pid {} exited", it->first);
      it = tracked_.erase(it);
    } else {
      ++it;
    }
  }
  std::set<uint32_t> skip;
  for (const auto& [pid, id] : tracked_) skip.insert(pid);
  for (uint32_t pid : scanner_.holders(static_cast<uint32_t>(::getpid()), skip)) track(pid, true);
  // Bound the identity cache: keep live pids and ranks still exported.
  std::set<uint32_t> keep;
  for (const auto& [k, s] : series_) keep.insert(s.pid_num);
  for (auto it = identity_cache_.begin(); it != identity_cache_.end();) {
    if (!tracked_.count(it->first) && !keep.count(it->first)) it = identity_cache_.erase(it);
    else ++it;
  }
}

void Daemon::note_new_process(uint32_t pid) {
  if (!(active_subsystems_ & ST_SUB_UPROBE)) return;
  lib_scan_.add(pid, monotonic_ns());
}

void Daemon::attach_lib(const std::string& path) {
  if (!tracer_ || !probed_libs_.insert(path).second) return;
  if (std::find(known_libs_.begin(), known_libs_.end(), path) == known_libs_.end() && known_libs_.size() < 64)
    known_libs_.push_back(path);
  std::vector<std::string> warnings;
  int attached = attach_lib_probes(*tracer_, path, &warnings);
  for (const auto& w : warnings) log::warn("{}", w);
  log::info("probing {} ({} functions)", path, attached);
}

void Daemon::scan_for_libs() {
  lib_scan_.scan(monotonic_ns(), "/proc", [this](const std::string& path) { attach_lib(path); });
}

void Daemon::on_record(const void* data, size_t len) {
  uint64_t ts = 0;
  if (len >= sizeof(st_event_header)) {
    st_event_header h;
    std::memcpy(&h, data, sizeof(h));
    ts = h.ts_ns;
  }
  flight_.append(ts, data, len);
  pipe_.push(data, len);
}

void Daemon::on_raw_record(const st_event_header& h, const void* data, size_t len) {
  if (h.kind == ST_EV_TASK_EXEC) note_new_process(h.pid);
  if (h.kind == ST_EV_TASK_NEW && len >= sizeof(st_task_new)) {
    st_task_new tn;
    std::memcpy(&tn, data, sizeof(tn));
    if (!(tn.flags & ST_TASK_IS_THREAD)) note_parent(tn.child_pid, tn.hdr.pid);
  }
}

void Daemon::close_window(uint64_t now, const char* reason) {
  if (!window_open_) return;
  pipe_.name_threads(SysRoot());
  const uint64_t events = pipe_.window_records();
  DropStats cur{};
  if (tracer_)
    if (auto d = tracer_->read_stats()) cur = *d;
  DropStats delta = cur.since(drops_window_start_);
  // Processes that should have been traced in this window and were not (the
  // target set refused them) leave their work out of it: INCOMPLETE.
  delta.losses[ST_LOSS_TARGET_ADD] = std::max<uint64_t>(window_target_add_failed_, untraced_.size());
  window_target_add_failed_ = 0;
  window_incomplete_ = delta.incomplete();
  JobAnalysis ja = pipe_.close_window(now, delta);
  publish(ja, window_detail_);
  ++windows_total_;
  ++window_closes_[reason];
  ++detail_windows_[window_detail_ ? 1 : 0];
  log::debug("window {} closed ({}): {} events, {} ranks, detail {}", window_no_, reason, events,
             ja.ranks.size(), window_detail_ ? "on" : "off (sampled out: steps only)");
  ++window_no_;
  cycle_.window_closed();
  window_start_ns_ = now;
  drops_window_start_ = cur;
  seed_parents();
  apply_detail();
}

// Steps are counted from every window (the accelerator and runtime-probe
// records never stop); categories, straggler steps and the verdict only from
// windows that had per-event detail throughout: without it a step's time
// cannot be split, and partial detail would split it wrongly.
void Daemon::publish(const JobAnalysis& ja, bool detail) {
  // The p99 before this window's steps decides whether one of them is an outlier.
  double p99 = 0;
  if (step_history_.size() >= kMinHistory) {
    std::vector<double> v(step_history_.begin(), step_history_.end());
    size_t idx = std::min(v.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size()))) - 1);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
    p99 = v[idx];
  }
  double worst = 0;
  uint64_t counted_steps = 0;
  const Straggler straggler_before = straggler_;
  straggler_ = Straggler{};
  for (const auto& r : ja.ranks) {
    ProcIdentity id;
    if (auto it = identity_cache_.find(r.pid); it != identity_cache_.end()) id = it->second;
    else {
      id = scanner_.identity(r.pid);
      identity_cache_[r.pid] = id;
    }
    if (id.rank.empty()) {
      // No RANK in the environment: the rank's order in the first window it was seen, kept
      // for the life of the process so its series stay one series.
      id.rank = std::to_string(r.rank);
      identity_cache_[r.pid].rank = id.rank;
    }
    std::string rank = id.rank;
    std::string key = fmt::format("{}\x1f{}\x1f{}", id.job, rank, r.pid);
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= cfg_.max_series) {
        ++cap_hits_["series"];
        continue;
      }
      RankSeries s;
      s.job = id.job;
      s.rank = rank;
      s.pid = std::to_string(r.pid);
      s.pid_num = r.pid;
      it = series_.emplace(key, std::move(s)).first;
    }
    RankSeries& s = it->second;
    s.last_window = window_no_;
    if (detail) {
      // Counted steps (as in r.total), less any that began before the
      // programs turned detail on: records the reorderer held back at the
      // edge can start this window's analysis a little before that.
      for (const auto& st : r.steps) {
        if (st.index < ja.skipped_warmup_steps || st.start_ns < detail_since_ns_) continue;
        for (size_t c = 0; c < kCategories; ++c) s.cat_s[c] += static_cast<double>(st.ns[c]) / 1e9;
      }
      s.straggler_steps += static_cast<uint64_t>(r.straggler_steps);
    }
    int skip = ja.skipped_warmup_steps;
    for (size_t i = 0; i < r.steps.size(); ++i) {
      if (static_cast<int>(i) < skip) continue;  // the window's first step may be cut at the edge
      double d = static_cast<double>(r.steps[i].duration()) / 1e9;
      for (size_t b = 0; b < kNumBuckets; ++b)
        if (d <= kBuckets[b]) ++s.buckets[b];
      s.sum_s += d;
      ++s.count;
      ++counted_steps;
      worst = std::max(worst, d);
      step_history_.push_back(d);
      if (step_history_.size() > kStepHistory) step_history_.pop_front();
    }
    if (detail && ja.verdict.straggler_rank == r.rank) straggler_ = {id.job, rank, s.pid, r.rank};
    for (const auto& f : ja.fabric.ranks) {
      if (f.pid != r.pid) continue;
      s.efa_calls[0] += f.in_steps.calls;
      s.efa_s[0] += static_cast<double>(f.in_steps.total_ns) / 1e9;
      s.efa_calls[1] += f.setup.calls + f.teardown.calls;
      s.efa_s[1] += static_cast<double>(f.setup.total_ns + f.teardown.total_ns) / 1e9;
    }
  }
  if (!detail && budget_.level() <= kLevelSampled) {
    // Sampled out: the last detailed window's verdict and straggler stand.
    straggler_ = straggler_before;
  } else if (!detail) {
    have_verdict_ = false;  // aggregated and up: no detail to judge from
  } else if (counted_steps > 0) {
    verdict_ = ja.verdict;
    have_verdict_ = true;
    log::info("verdict: {} ({:.0f}% confidence): {}", category_name(verdict_.category), verdict_.confidence * 100,
              verdict_.headline);
  } else {
    have_verdict_ = false;
  }
  // Series of processes that are gone and quiet for two windows are dropped.
  for (auto it = series_.begin(); it != series_.end();) {
    if (it->second.last_window + 2 < window_no_ && !scanner_.alive(it->second.pid_num)) it = series_.erase(it);
    else ++it;
  }
  if (cfg_.auto_dump && p99 > 0 && worst > p99 * cfg_.auto_dump_factor &&
      now_s() - last_auto_dump_s_ >= cfg_.dump_min_interval_s) {
    last_auto_dump_s_ = now_s();
    log::warn("slow step: {:.3f} s > p99 {:.3f} s x {}: dumping the flight recorder", worst, p99, cfg_.auto_dump_factor);
    if (auto r = dump("slow_step"); !r) log::error("flight recorder dump failed: {}", r.error().message);
  }
}

void Daemon::sample_cpu() {
  read_aggregates(false);
  double t = now_s();
  cpu_ = rusage_self();
  double bpf = bpf_base_s_;
  if (tracer_)
    for (const auto& p : tracer_->prog_stats()) bpf += static_cast<double>(p.run_time_ns) / 1e9;
  bpf_now_s_ = bpf;
  double total = cpu_.user + cpu_.sys + bpf;
  // A second spent wholly in sampled-out windows (not the one whose
  // detailed window closed in it: that analysis is the costly part).
  const bool cheap = budget_.level() == kLevelSampled && !detail_since_sample_ && !window_detail_;
  detail_since_sample_ = window_detail_;
  if (last_sample_s_ > 0) {
    auto a = budget_.sample(t, total - last_cpu_total_, t - last_sample_s_, cheap);
    if (a == BudgetController::Action::degrade) {
      ++degradations_;
      apply_level(budget_.level(), "over budget");
    } else if (a == BudgetController::Action::recover) {
      apply_level(budget_.level(), "back under budget");
    }
  }
  last_cpu_total_ = cpu_.user + cpu_.sys + bpf_now_s_;
  // apply_level may have rebuilt the tracer; re-read so the next delta starts here.
  if (tracer_) {
    double b = bpf_base_s_;
    for (const auto& p : tracer_->prog_stats()) b += static_cast<double>(p.run_time_ns) / 1e9;
    last_cpu_total_ = cpu_.user + cpu_.sys + b;
  }
  last_sample_s_ = t;
}

void Daemon::render_metrics() {
  Exposition x;
  auto H = [this](Labels l) {
    l.insert(l.begin(), {"host", host_});
    return l;
  };
  x.family("steptrace_build_info", "gauge", "steptrace version");
  x.sample("steptrace_build_info", H({{"version", kVersion}}), 1);

  x.family("steptrace_step_duration_seconds", "histogram", "Training step wall time per rank (steps cut by a window edge excluded)");
  for (const auto& [k, s] : series_) {
    Labels base = H({{"job", s.job}, {"rank", s.rank}, {"pid", s.pid}});
    for (size_t b = 0; b < kNumBuckets; ++b) {
      Labels l = base;
      l.emplace_back("le", format_value(kBuckets[b]));
      x.sample("steptrace_step_duration_seconds_bucket", l, static_cast<double>(s.buckets[b]));
    }
    Labels inf = base;
    inf.emplace_back("le", "+Inf");
    x.sample("steptrace_step_duration_seconds_bucket", inf, static_cast<double>(s.count));
    x.sample("steptrace_step_duration_seconds_sum", base, s.sum_s);
    x.sample("steptrace_step_duration_seconds_count", base, static_cast<double>(s.count));
  }
  x.family("steptrace_category_seconds_total", "counter", "Step wall time attributed to each category, per rank");
  for (const auto& [k, s] : series_)
    for (size_t c = 0; c < kCategories; ++c)
      x.sample("steptrace_category_seconds_total",
               H({{"category", std::string(kCategoryNames[c])}, {"rank", s.rank}, {"pid", s.pid}, {"job", s.job}}),
               s.cat_s[c]);
  x.family("steptrace_straggler_steps_total", "counter", "Steps in which this rank arrived last at the collective");
  for (const auto& [k, s] : series_)
    x.sample("steptrace_straggler_steps_total", H({{"job", s.job}, {"rank", s.rank}, {"pid", s.pid}}),
             static_cast<double>(s.straggler_steps));

  x.family("steptrace_efa_control_calls_total", "counter",
           "uverbs calls (EFA control path: queue pairs, memory registrations) inside steps or outside them");
  x.family("steptrace_efa_control_seconds_total", "counter", "Time in those uverbs calls");
  for (const auto& [k, s] : series_)
    for (int w = 0; w < 2; ++w) {
      auto labels = H({{"job", s.job}, {"rank", s.rank}, {"pid", s.pid}, {"where", w ? "outside_steps" : "in_steps"}});
      x.sample("steptrace_efa_control_calls_total", labels, static_cast<double>(s.efa_calls[w]));
      x.sample("steptrace_efa_control_seconds_total", labels, s.efa_s[w]);
    }

  x.family("steptrace_verdict", "gauge", "1 for what gates the accelerator in the last window (verdict=none: no steps)");
  std::string current = have_verdict_ ? std::string(category_name(verdict_.category)) : "none";
  for (size_t c = 0; c < kCategories; ++c)
    x.sample("steptrace_verdict", H({{"verdict", std::string(kCategoryNames[c])}}), current == kCategoryNames[c] ? 1 : 0);
  x.sample("steptrace_verdict", H({{"verdict", "none"}}), current == "none" ? 1 : 0);
  x.family("steptrace_verdict_confidence", "gauge", "Confidence of the current verdict (0..1)");
  x.sample("steptrace_verdict_confidence", H({}), have_verdict_ ? verdict_.confidence : 0);
  x.family("steptrace_straggler_rank", "gauge", "Rank index of the straggler in the last window, -1 when none");
  x.sample("steptrace_straggler_rank", H({{"job", straggler_.job}, {"rank", straggler_.rank}, {"pid", straggler_.pid}}),
           straggler_.rank_num);

  // In-kernel per-process counters (levels aggregated and up; frozen below them).
  auto P = [&H](const ProcAggSeries& s, Labels more = {}) {
    Labels l = H({{"job", s.job}, {"rank", s.rank}, {"pid", s.pid}});
    l.insert(l.end(), more.begin(), more.end());
    return l;
  };
  x.family("steptrace_process_cpu_seconds_total", "counter",
           "On-CPU time of a traced process (sum_exec_runtime, counted in the kernel at levels aggregated and up)");
  for (const auto& [tgid, s] : agg_)
    x.sample("steptrace_process_cpu_seconds_total", P(s), static_cast<double>(s.cur.oncpu_ns) / 1e9);
  x.family("steptrace_process_runqueue_wait_seconds_total", "counter",
           "Time a traced process's threads waited on a run queue (schedstat run_delay)");
  for (const auto& [tgid, s] : agg_)
    x.sample("steptrace_process_runqueue_wait_seconds_total", P(s), static_cast<double>(s.cur.runq_wait_ns) / 1e9);
  x.family("steptrace_process_context_switches_total", "counter",
           "Context switches of a traced process's threads (type=involuntary: left the CPU still runnable)");
  for (const auto& [tgid, s] : agg_) {
    x.sample("steptrace_process_context_switches_total", P(s, {{"type", "voluntary"}}),
             static_cast<double>(s.cur.switches - std::min(s.cur.switches, s.cur.involuntary)));
    x.sample("steptrace_process_context_switches_total", P(s, {{"type", "involuntary"}}),
             static_cast<double>(s.cur.involuntary));
  }
  x.family("steptrace_process_network_bytes_total", "counter", "TCP payload bytes a traced process sent and received");
  for (const auto& [tgid, s] : agg_) {
    x.sample("steptrace_process_network_bytes_total", P(s, {{"direction", "send"}}),
             static_cast<double>(s.cur.net_send_bytes));
    x.sample("steptrace_process_network_bytes_total", P(s, {{"direction", "receive"}}),
             static_cast<double>(s.cur.net_recv_bytes));
  }
  x.family("steptrace_process_block_bytes_total", "counter", "Bytes of completed block requests a traced process issued");
  for (const auto& [tgid, s] : agg_) {
    x.sample("steptrace_process_block_bytes_total", P(s, {{"op", "read"}}), static_cast<double>(s.cur.block_read_bytes));
    x.sample("steptrace_process_block_bytes_total", P(s, {{"op", "write"}}),
             static_cast<double>(s.cur.block_write_bytes));
  }
  x.family("steptrace_process_block_requests_total", "counter", "Completed block requests a traced process issued");
  for (const auto& [tgid, s] : agg_)
    x.sample("steptrace_process_block_requests_total", P(s), static_cast<double>(s.cur.block_rqs));

  DropStats d = cumulative_drops();
  x.family("steptrace_events_total", "counter", "Events emitted by the BPF collectors, per class");
  for (int k = 1; k < ST_EV_KIND_MAX; ++k)
    x.sample("steptrace_events_total", H({{"class", std::string(kind_name(static_cast<uint32_t>(k)))}}),
             static_cast<double>(d.emitted[k]));
  x.family("steptrace_events_dropped_total", "counter", "Events lost to a full ring buffer, per class");
  for (int k = 1; k < ST_EV_KIND_MAX; ++k)
    x.sample("steptrace_events_dropped_total", H({{"class", std::string(kind_name(static_cast<uint32_t>(k)))}}),
             static_cast<double>(d.dropped[k]));
  x.family("steptrace_bpf_losses_total", "counter",
           "State the BPF collectors could not keep (full or evicting maps, missed kretprobes, processes the target "
           "set refused), per kind; see steptrace_bpf_loss_measurable");
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    x.sample("steptrace_bpf_losses_total", H({{"kind", std::string(loss_name(k))}}), static_cast<double>(d.losses[k]));
  x.family("steptrace_bpf_loss_measurable", "gauge",
           "0 when this kernel cannot measure a loss kind (kretprobe misses before 6.7): its counter stays 0");
  for (int k = 0; k < ST_LOSS_KIND_MAX; ++k)
    x.sample("steptrace_bpf_loss_measurable", H({{"kind", std::string(loss_name(k))}}),
             k == ST_LOSS_KRETPROBE_MISSED && d.kretprobe == LossMeasure::not_measurable ? 0 : 1);
  x.family("steptrace_target_add_failures_total", "counter",
           "Processes to trace that the kernel's target set refused, by cause (map_full: ST_MAX_TARGETS reached)");
  for (const char* c : {"map_full", "error"})
    x.sample("steptrace_target_add_failures_total", H({{"cause", c}}), static_cast<double>(target_add_failures_[c]));
  x.family("steptrace_untraced_processes", "gauge", "Processes to trace that are not in the target set now");
  x.sample("steptrace_untraced_processes", H({}), static_cast<double>(untraced_.size()));
  x.family("steptrace_window_incomplete", "gauge",
           "1 when the last closed analysis window lost events or attribution (drops or losses): its verdict and "
           "categories may be off");
  x.sample("steptrace_window_incomplete", H({}), window_incomplete_ ? 1 : 0);
  x.family("steptrace_records_total", "counter", "Records read from the ring buffer");
  x.sample("steptrace_records_total", H({}), static_cast<double>(pipe_.records()));
  x.family("steptrace_late_records_total", "counter", "Records that arrived too late to be ordered");
  x.sample("steptrace_late_records_total", H({}), static_cast<double>(pipe_.late()));

  x.family("steptrace_tracer_cpu_seconds_total", "counter",
           "CPU used by the tracer: userspace (mode=user|system, getrusage) and BPF programs (mode=bpf, BPF stats)");
  x.sample("steptrace_tracer_cpu_seconds_total", H({{"mode", "user"}}), cpu_.user);
  x.sample("steptrace_tracer_cpu_seconds_total", H({{"mode", "system"}}), cpu_.sys);
  x.sample("steptrace_tracer_cpu_seconds_total", H({{"mode", "bpf"}}), bpf_now_s_);
  x.family("steptrace_bpf_prog_run_seconds_total", "counter", "Run time of each BPF program");
  std::map<std::string, double> progs = prog_base_s_;
  if (tracer_)
    for (const auto& p : tracer_->prog_stats()) progs[p.name] += static_cast<double>(p.run_time_ns) / 1e9;
  for (const auto& [name, s] : progs) x.sample("steptrace_bpf_prog_run_seconds_total", H({{"prog", name}}), s);
  x.family("steptrace_bpf_stats_enabled", "gauge", "1 when BPF run-time statistics are on");
  x.sample("steptrace_bpf_stats_enabled", H({}), stats_fd_ >= 0 ? 1 : 0);
  x.family("steptrace_resident_memory_bytes", "gauge", "Resident set size of the daemon");
  x.sample("steptrace_resident_memory_bytes", H({}), static_cast<double>(rss_bytes()));

  x.family("steptrace_cpu_budget_percent", "gauge", "CPU budget, percent of one core");
  x.sample("steptrace_cpu_budget_percent", H({}), budget_.budget_percent());
  x.family("steptrace_cpu_usage_percent", "gauge", "Tracer CPU (userspace + BPF) over the last seconds, percent of one core");
  x.sample("steptrace_cpu_usage_percent", H({}), budget_.average_percent());
  x.family("steptrace_degradation_level", "gauge",
           "Position on the degradation ladder (label level): 0 full, 1 slow_drain, 2 sampled, 3 aggregated, "
           "4 no_net, 5 no_block, 6 no_sched, 7 paused; higher levels shed work to stay within the CPU budget");
  x.sample("steptrace_degradation_level", H({{"level", std::string(kLevels[budget_.level()].name)}}), budget_.level());
  x.family("steptrace_degradations_total", "counter", "Times the CPU budget forced a degradation step");
  x.sample("steptrace_degradations_total", H({}), static_cast<double>(degradations_));
  x.family("steptrace_degradation_floor", "gauge", "The configured lowest-cost start level (degrade_level)");
  x.sample("steptrace_degradation_floor", H({{"level", std::string(kLevels[budget_.floor()].name)}}), budget_.floor());
  x.family("steptrace_detail_windows_total", "counter",
           "Analysis windows closed with per-event sched/net/block detail (detail=on) or without it (detail=off: "
           "sampled out at level sampled, or aggregated and up); categories and the verdict come from detail=on only");
  x.sample("steptrace_detail_windows_total", H({{"detail", "on"}}), static_cast<double>(detail_windows_[1]));
  x.sample("steptrace_detail_windows_total", H({{"detail", "off"}}), static_cast<double>(detail_windows_[0]));
  x.family("steptrace_detail_enabled", "gauge", "1 when the current window records per-event detail");
  x.sample("steptrace_detail_enabled", H({}), window_detail_ && tracer_ ? 1 : 0);
  x.family("steptrace_aggregation_enabled", "gauge", "1 when the BPF programs count per process in the kernel");
  x.sample("steptrace_aggregation_enabled", H({}), budget_.level() >= kLevelAggregated && tracer_ ? 1 : 0);
  x.family("steptrace_collector_enabled", "gauge", "1 when the collector runs");
  const std::pair<const char*, uint32_t> subs[] = {
      {"sched", ST_SUB_SCHED}, {"block", ST_SUB_BLOCK}, {"net", ST_SUB_NET}, {"accel", ST_SUB_ACCEL}, {"uprobe", ST_SUB_UPROBE}};
  for (const auto& [name, bit] : subs)
    x.sample("steptrace_collector_enabled", H({{"collector", name}}), (active_subsystems_ & bit) ? 1 : 0);

  x.family("steptrace_tracked_processes", "gauge", "Accelerator processes traced now");
  x.sample("steptrace_tracked_processes", H({}), static_cast<double>(tracked_.size()));
  x.family("steptrace_discovered_processes_total", "counter", "Accelerator processes discovered");
  x.sample("steptrace_discovered_processes_total", H({}), static_cast<double>(discovered_total_));
  x.family("steptrace_cap_hits_total", "counter", "Times a hard memory cap was hit");
  for (const char* c : {"processes", "series", "window_events"})
    x.sample("steptrace_cap_hits_total", H({{"cap", c}}), static_cast<double>(cap_hits_[c]));
  x.family("steptrace_windows_total", "counter", "Analysis windows closed, by reason");
  for (const char* c : {"timer", "event_cap", "tracer_rebuild", "level_change"})
    x.sample("steptrace_windows_total", H({{"reason", c}}), static_cast<double>(window_closes_[c]));
  x.family("steptrace_flight_recorder_bytes", "gauge", "Memory held by the flight recorder");
  x.sample("steptrace_flight_recorder_bytes", H({}), static_cast<double>(flight_.bytes()));
  x.family("steptrace_flight_recorder_records", "gauge", "Raw records held by the flight recorder");
  x.sample("steptrace_flight_recorder_records", H({}), static_cast<double>(flight_.records()));
  x.family("steptrace_dumps_total", "counter", "Flight-recorder captures written, by trigger");
  for (const char* c : {"signal", "http", "slow_step"})
    x.sample("steptrace_dumps_total", H({{"reason", c}}), static_cast<double>(dumps_ok_[c]));
  x.family("steptrace_dump_failures_total", "counter", "Flight-recorder captures that failed or were rate-limited");
  x.sample("steptrace_dump_failures_total", H({}), static_cast<double>(dump_failures_));
  x.family("steptrace_config_reloads_total", "counter", "SIGHUP reloads, by result");
  x.sample("steptrace_config_reloads_total", H({{"result", "ok"}}), static_cast<double>(reload_ok_));
  x.sample("steptrace_config_reloads_total", H({{"result", "error"}}), static_cast<double>(reload_err_));
  std::lock_guard<std::mutex> lk(mu_);
  metrics_text_ = x.text();
}

void Daemon::reload() {
  int code = 0;
  auto c = load_config(argc_, argv_, &code);
  if (!c) {
    ++reload_err_;
    log::error("reload failed, keeping the running configuration: {}", c.error().message);
    return;
  }
  if (c->listen != cfg_.listen || c->ring_mib != cfg_.ring_mib || c->btf_path != cfg_.btf_path ||
      c->collectors != cfg_.collectors || c->accel_devs != cfg_.accel_devs || c->rdma_devs != cfg_.rdma_devs)
    log::warn("reload: listen, ring_mib, btf, collectors, accel_devs and rdma_devs take effect at restart");
  DaemonConfig keep = cfg_;
  cfg_ = *c;
  cfg_.listen = keep.listen;
  cfg_.ring_mib = keep.ring_mib;
  cfg_.btf_path = keep.btf_path;
  cfg_.collectors = keep.collectors;
  cfg_.accel_devs = keep.accel_devs;
  cfg_.rdma_devs = keep.rdma_devs;
  apply_runtime_config();
  if (budget_.set_floor(level_by_name(cfg_.degrade_level))) apply_level(budget_.level(), "degrade_level raised");
  else enter_level(budget_.level());
  ++reload_ok_;
  log::info("configuration reloaded from {} (max_cpu {}%, window {} s, flight recorder {} s / {} MiB)", cfg_.config_path,
            cfg_.max_cpu_percent, cfg_.window_s, cfg_.flight_seconds, cfg_.flight_mib);
}

Status Daemon::prepare_dump_dir() {
  std::error_code ec;
  std::filesystem::path dir(cfg_.dump_dir);
  if (!std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) {
    std::filesystem::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return make_error(fmt::format("cannot create dump directory {}: {}", cfg_.dump_dir, std::strerror(errno)));
  }
  // The directory may be reached through a symlink (systemd's DynamicUser puts
  // StateDirectory in /var/lib/private); what it resolves to must be ours alone.
  // Files inside are created O_EXCL|O_NOFOLLOW and renamed into place.
  auto real = std::filesystem::canonical(dir, ec);
  if (ec) return make_error(fmt::format("dump directory {}: {}", cfg_.dump_dir, ec.message()));
  struct stat st {};
  if (::lstat(real.c_str(), &st) != 0) return make_error(fmt::format("dump directory {}: {}", cfg_.dump_dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) return make_error(fmt::format("dump directory {} is not a directory", cfg_.dump_dir));
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWOTH | S_IWGRP)))
    return make_error(fmt::format("dump directory {} must be owned by us and writable by nobody else", cfg_.dump_dir));
  return Ok{};
}

nlohmann::json Daemon::capture_meta(const std::string& reason) const {
  struct timespec rt {};
  clock_gettime(CLOCK_REALTIME, &rt);
  uint64_t real_ns = static_cast<uint64_t>(rt.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(rt.tv_nsec);
  nlohmann::json tiers = nlohmann::json::object();
  if (tracer_)
    for (const auto& t : tracer_->tiers()) tiers[t.collector] = t.tier;
  std::vector<uint32_t> pids;
  for (const auto& [pid, id] : tracked_) pids.push_back(pid);
  uint64_t now = monotonic_ns();
  uint64_t keep = static_cast<uint64_t>(cfg_.flight_seconds * 1e9);
  return {{"host", host_},
          {"kernel", features_.release},
          {"abi_version", ST_ABI_VERSION},
          {"argv", nlohmann::json::array()},
          {"pids", pids},
          {"accel_devs", cfg_.accel_devs},
          {"subsystems", active_subsystems_},
          {"ring_mib", cfg_.ring_mib},
          {"drain_ms", drain_ms_},
          {"attach_tiers", tiers},
          {"source", "steptrace daemon flight recorder"},
          {"dump_reason", reason},
          {"realtime_minus_monotonic_ns", static_cast<int64_t>(real_ns - now)},
          {"window_start_ns", now > keep ? now - keep : 0}};
}

Result<std::string> Daemon::dump(const std::string& reason) {
  if (auto s = prepare_dump_dir(); !s) {
    ++dump_failures_;
    return s.error();
  }
  char ts[32];
  time_t t = ::time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  std::strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
  std::string base = fmt::format("{}/steptrace-{}-{}-{}", cfg_.dump_dir, host_, ts, reason);
  std::string path = base + ".cap";
  for (int i = 1; ::access(path.c_str(), F_OK) == 0 && i < 100; ++i) path = fmt::format("{}-{}.cap", base, i);
  auto st = flight_.dump(path, capture_meta(reason), cumulative_drops(), monotonic_ns());
  if (!st) {
    ++dump_failures_;
    return st.error();
  }
  ++dumps_ok_[reason];
  log::info("flight recorder: wrote {} ({} records)", path, flight_.records());
  // Keep the newest kMaxDumpFiles captures.
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cfg_.dump_dir, ec)) {
    auto name = e.path().filename().string();
    if (name.rfind("steptrace-", 0) == 0 && e.path().extension() == ".cap" && e.is_regular_file(ec))
      files.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + kMaxDumpFiles < files.size(); ++i) std::filesystem::remove(files[i].second, ec);
  return path;
}

void Daemon::handle_dumps() {
  auto manual = [this](const std::string& reason) -> std::pair<int, std::string> {
    if (now_s() - last_manual_dump_s_ < kManualDumpMinS) {
      ++dump_failures_;
      return {429, fmt::format("rate-limited: one dump per {} s", kManualDumpMinS)};
    }
    last_manual_dump_s_ = now_s();
    auto r = dump(reason);
    if (!r) {
      log::error("flight recorder dump failed: {}", r.error().message);
      return {500, r.error().message};
    }
    return {200, *r};
  };
  if (g_dump.exchange(false)) {
    auto [code, msg] = manual("signal");
    if (code == 429) log::warn("SIGUSR1: {}", msg);
  }
  std::deque<std::shared_ptr<DumpRequest>> q;
  {
    std::lock_guard<std::mutex> lk(mu_);
    q.swap(dump_queue_);
  }
  if (q.empty()) return;
  for (auto& req : q) {
    auto [code, msg] = manual(req->reason);
    std::lock_guard<std::mutex> lk(mu_);
    req->http_status = code;
    req->message = msg;
    req->done = true;
  }
  cv_.notify_all();
}

int Daemon::run() {
  uint64_t next_second = 0;
  render_metrics();
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(drain_ms_));
    if (g_reload.exchange(false)) reload();
    uint64_t now = monotonic_ns();
    if (reader_) {
      if (auto n = reader_->drain(); !n) {
        log::error("ring buffer: {}", n.error().message);
        return kExitCannotTrace;
      }
      pipe_.advance();
    }
    if (now >= next_discover_ns_) {
      discover();
      next_discover_ns_ = now + static_cast<uint64_t>(cfg_.scan_ms) * 1'000'000ull;
    }
    if (!lib_scan_.empty()) scan_for_libs();
    flight_.evict(now);
    handle_dumps();
    if (pipe_.window_records() >= cfg_.max_window_events) {
      ++cap_hits_["window_events"];
      close_window(now, "event_cap");
    } else if (window_open_ && now - window_start_ns_ >= static_cast<uint64_t>(cfg_.window_s * 1e9)) {
      close_window(now, "timer");
    }
    if (now >= next_second) {
      sample_cpu();
      render_metrics();
      next_second = now + 1'000'000'000ull;
    }
  }
  log::info("stopping");
  // Answer anyone still waiting on a dump.
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& r : dump_queue_) {
      r->http_status = 503;
      r->message = "shutting down";
      r->done = true;
    }
    dump_queue_.clear();
  }
  cv_.notify_all();
  return exit_code_;
}

}  // namespace

int daemon_main(int argc, char** argv) {
  int code = 0;
  auto cfg = load_config(argc, argv, &code);
  if (!cfg) {
    if (!cfg.error().message.empty()) fmt::print(stderr, "steptrace daemon: {}\n", cfg.error().message);
    return cfg.error().message.empty() ? code : 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_hup;
  sigaction(SIGHUP, &sa, nullptr);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Daemon d(*cfg, argc, argv);
  log::set_level(log::Level::info);
  if (auto s = d.start(); !s) {
    log::error("{}", s.error().message);
    return kExitCannotTrace;
  }
  return d.run();
}

}  // namespace steptrace::daemon
