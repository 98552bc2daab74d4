// SPDX-License-Identifier: Apache-2.0
#include "session/symbol_worker.h"

#include "symbols/symbolizer.h"

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

SymbolWorker::SymbolWorker(const SysRoot& root)
    : sym_(std::make_unique<symbols::Symbolizer>(root)), thread_([this] { loop(); }) {}

SymbolWorker::~SymbolWorker() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SymbolWorker::sampled(uint32_t pid) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || !current_.insert(pid).second) return;
    queue_.push_back(pid);
  }
  cv_.notify_one();
}

void SymbolWorker::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const uint32_t pid = queue_.front();
    queue_.pop_front();
    l.unlock();
    (void)sym_->snapshot(pid);  // a process gone already keeps no names (its frames show addresses)
    l.lock();
  }
}

size_t SymbolWorker::name_stacks(SampleStore& store) {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  size_t named = 0;
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
