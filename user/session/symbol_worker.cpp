// SPDX-License-Identifier: Apache-2.0
#include "session/symbol_worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstring>

#include "symbols/python_procs.h"
#include "symbols/symbolizer.h"
#include "util/log.h"

namespace steptrace {

namespace {

// "ns::fn(long, char const*) const" -> "ns::fn": a stack reads better without
// the parameter lists (templates and "(anonymous namespace)" stay).
std::string without_parameters(std::string name) {
  std::string_view v = name;
  if (v.size() > 6 && v.substr(v.size() - 6) == " const") v.remove_suffix(6);
  if (v.empty() || v.back() != ')') return name;
  int depth = 0;
  for (size_t i = v.size(); i-- > 0;) {
    if (v[i] == ')') ++depth;
    else if (v[i] == '(' && --depth == 0) return i > 0 ? std::string(v.substr(0, i)) : name;
  }
  return name;
}

}  // namespace

namespace {
// Code objects asked about, over all processes: a bound on a hostile or
// code-generating job (each costs a few reads of its memory).
constexpr size_t kMaxPythonCodes = 200000;
constexpr uint64_t kForget = ~0ull;  // a Task: the process exec'd
}  // namespace

SymbolWorker::SymbolWorker(const SysRoot& root, PythonHook on_python)
    : root_(root),
      on_python_(std::move(on_python)),
      sym_([&root] {
        // Only the maps (and the files opened) while the job runs: the
        // symbols are read once tracing ends (name_stacks).
        auto s = std::make_unique<symbols::Symbolizer>(root);
        s->set_deferred(true);
        return s;
      }()),
      thread_([this] { loop(); }) {}

SymbolWorker::~SymbolWorker() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SymbolWorker::sampled(uint32_t pid, const void* data, size_t len) {
  st_cpu_sample r;
  if (len < ST_CPU_SAMPLE_HDR_SIZE) return;
  std::memcpy(&r, data, ST_CPU_SAMPLE_HDR_SIZE);
  const size_t first = static_cast<size_t>(r.n_user) + r.n_kernel;
  const size_t n = r.n_python <= ST_SAMPLE_MAX_PYTHON ? r.n_python : 0;
  if ((first + n) * sizeof(uint64_t) + ST_CPU_SAMPLE_HDR_SIZE > len) return;
  if (stop_) return;
  if (current_.insert(pid).second) pending_.push_back({pid, 0});
  for (size_t i = 0; i < n; ++i) {
    uint64_t code;
    std::memcpy(&code, static_cast<const uint8_t*>(data) + ST_CPU_SAMPLE_HDR_SIZE + (first + i) * sizeof(uint64_t),
                sizeof(code));
    if (asked_.size() >= kMaxPythonCodes || !asked_.insert({pid, code}).second) continue;
    pending_.push_back({pid, code});
  }
  hand_over(false);
}

void SymbolWorker::hand_over(bool wait) {
  if (pending_.empty()) return;
  // The drain thread never waits for the worker: at nice 19 on a CPU the job
  // keeps busy, a worker preempted while it holds the lock could hold the
  // drain up for as long as the scheduler leaves it off the CPU, and the
  // kernel ring fills meanwhile. Tasks not handed over now go with the next.
  std::unique_lock<std::mutex> l(mu_, std::defer_lock);
  if (wait)
    l.lock();
  else if (!l.try_lock())
    return;
  queue_.insert(queue_.end(), pending_.begin(), pending_.end());
  pending_.clear();
  l.unlock();
  cv_.notify_one();
}

void SymbolWorker::exec(uint32_t pid) {
  // The new program's code objects may sit where the old one's did (a
  // launcher that runs Python, then execs the job's interpreter).
  current_.erase(pid);
  asked_.erase(asked_.lower_bound({pid, 0}), asked_.lower_bound({pid + 1, 0}));
  pending_.push_back({pid, kForget});
  hand_over(false);
  if (on_python_) on_python_(pid, nullptr);  // a new program: walked again once found to be Python
}

void SymbolWorker::run(const Task& t) {
  if (t.code == kForget) {
    python_.erase(t.pid);
    python_names_.erase(python_names_.lower_bound({t.pid, 0}), python_names_.lower_bound({t.pid + 1, 0}));
    return;
  }
  if (t.code == 0) {
    (void)sym_->snapshot(t.pid);  // a process gone already keeps no names (its frames show addresses)
    auto py = symbols::find_python(root_, t.pid);
    if (!py) {
      python_.erase(t.pid);
      return;
    }
    if (!py->layout.code_tag) py->layout.code_tag = 112;  // co_filename in 3.11 and 3.12
    auto keep = std::make_shared<const symbols::PythonProcess>(std::move(*py));
    if (on_python_) on_python_(t.pid, &keep->layout);
    python_[t.pid] = std::move(keep);
    return;
  }
  auto it = python_.find(t.pid);
  if (it == python_.end()) return;
  const symbols::PythonProcess& py = *it->second;
  if (auto name = symbols::python_code_name(root_, t.pid, t.code & ST_PY_CODE_ADDR_MASK, py)) {
    log::debug("python code {:#x} of {}: {}", t.code, t.pid, *name);
    python_names_[{t.pid, t.code}] = *name;
  }
}

void SymbolWorker::loop() {
  // Reading a map and a library's symbols (libc's debug file, libtorch) is
  // CPU the traced job may need: this thread yields to it (nice 19, this
  // thread only), and still gets a share on a machine the job keeps busy.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const Task t = queue_.front();
    queue_.pop_front();
    l.unlock();
    run(t);
    l.lock();
  }
}

size_t SymbolWorker::name_stacks(SampleStore& store) {
  hand_over(true);
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  sym_->load_deferred();
  size_t named = 0;
  for (const auto& [key, name] : python_names_) {
    store.set_name(key.first, key.second, name);
    ++named;
  }
  const auto stacks = store.stacks();  // a copy: set_name does not touch stacks, but keep it simple
  for (const auto& s : stacks) {
    // Past the leaf, each address is a return address: the call is the
    // instruction before it (which may be the last of another function).
    for (size_t i = 0; i < s.user.size(); ++i) {
      if (store.name_of(s.pid, s.user[i])) continue;
      const uint64_t ip = i == 0 ? s.user[i] : s.user[i] - 1;
      const symbols::Frame f = sym_->has_snapshot(s.pid) ? sym_->resolve_user(s.pid, ip) : symbols::Frame{};
      if (f.function.empty() && f.module.empty()) continue;
      store.set_name(s.pid, s.user[i], without_parameters(f.display()));
      ++named;
    }
    for (size_t i = 0; i < s.kernel.size(); ++i) {
      if (store.name_of(0, s.kernel[i])) continue;
      const symbols::Frame f = sym_->resolve_kernel(i == 0 ? s.kernel[i] : s.kernel[i] - 1);
      if (f.function.empty()) continue;
      store.set_name(0, s.kernel[i], f.display());
      ++named;
    }
  }
  return named;
}

std::vector<nlohmann::json> symbol_notes(const SampleStore& store) {
  std::vector<nlohmann::json> out;
  nlohmann::json names = nlohmann::json::array();
  size_t bytes = 0;
  for (const auto& [key, name] : store.names()) {
    names.push_back({key.first, key.second, name});
    bytes += name.size() + 40;
    if (bytes > 12000) {  // ST_USER_NOTE_MAX is 16 KiB
      out.push_back({{"note", "symbols"}, {"names", std::move(names)}});
      names = nlohmann::json::array();
      bytes = 0;
    }
  }
  if (!names.empty()) out.push_back({{"note", "symbols"}, {"names", std::move(names)}});
  return out;
}

}  // namespace steptrace
