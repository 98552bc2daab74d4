// SPDX-License-Identifier: Apache-2.0
// The device counters in a capture (pipeline/signal_notes.h): what a
// recording's sampler found comes back whole from its notes, in notes that
// fit a record, through the Analysis a replay drives; a live analysis keeps
// its own sampler's data; malformed notes are counted and change nothing.
#include <catch2/catch.hpp>

#include "capture/user_note.h"
#include "pipeline/analysis.h"
#include "pipeline/signal_notes.h"
#include "signals/counters.h"

using namespace steptrace;
using signals::SignalsData;

namespace {

SignalsData recorded() {
  SignalsData d;
  d.cfg.dev_root = "/dev";
  d.cfg.sysfs_root = "/sys";
  d.devices = {{0, "/dev/neuron0"}, {1, "/dev/neuron1"}};
  signals::EfaPort p;
  p.index = 0;
  p.name = "efa_0";
  p.rate_gbit = 3.2;
  d.efa_ports.push_back(p);
  d.pid_device = {{100, 0}, {200, 1}};
  d.numa.cpu_node = {0, 0, 1, 1};
  d.numa.device_node = {{0, 0}, {1, 1}};
  d.numa.nodes = 2;
  d.comms = {{101, "nccom-proxy0"}};
  d.tid_pid = {{101, 100}};
  const size_t names = signals::efa_counter_names().size();
  for (uint64_t i = 0; i < 3000; ++i) {  // far more than one note holds
    signals::NdsSample n;
    n.pid = i % 2 ? 200 : 100;
    n.device = static_cast<int>(i % 2);
    n.prev_ns = 1'000'000 * i;
    n.seen_ns = 1'000'000 * i + 500'000;
    n.delta = 1 + i % 3;
    n.snap.inference_count = i;
    n.snap.completed = i;
    n.snap.cc_s = 0.001 * static_cast<double>(i % 7);
    n.snap.compute_s = 0.0125;
    d.nds.push_back(n);
    signals::EfaSample e;
    e.ts = 10'000'000 * i;
    e.port = 0;
    e.v.assign(names, 5);
    e.v[0] = 4096 * (i / 4);  // moves every fourth sample
    if (i % 500 == 0) e.v[1] = UINT64_MAX;  // a counter that was missing
    d.efa.push_back(e);
  }
  d.sysfs.push_back({500, 0, {{"status/success/total", 7}}});
  return d;
}

}  // namespace

TEST_CASE("signal notes: a recording's device counters come back whole from its notes", "[unit][signals]") {
  const SignalsData d = recorded();
  SignalNoteWriter w;
  std::vector<nlohmann::json> notes = w.notes(d, d, 0);
  REQUIRE(notes.size() > 3);
  SignalNoteReader r;
  for (const auto& n : notes) {
    // Every note fits one record.
    REQUIRE_FALSE(make_user_note(1, 0, n).empty());
    auto rec = make_user_note(1, 0, n);
    auto back = parse_user_note(rec.data(), rec.size());
    REQUIRE(back);
    CHECK(r.on_note(*back));
  }
  CHECK(r.malformed() == 0);
  const SignalsData& g = r.data();
  CHECK(g.devices == d.devices);
  REQUIRE(g.efa_ports.size() == 1);
  CHECK(g.efa_ports[0].rate_gbit == 3.2);
  CHECK(g.pid_device == d.pid_device);
  CHECK(g.numa.cpu_node == d.numa.cpu_node);
  CHECK(g.numa.device_node == d.numa.device_node);
  CHECK(g.comms == d.comms);
  CHECK(g.tid_pid == d.tid_pid);
  REQUIRE(g.nds.size() == d.nds.size());
  for (size_t i = 0; i < d.nds.size(); ++i) {
    INFO("nds " << i);
    CHECK(g.nds[i].pid == d.nds[i].pid);
    CHECK(g.nds[i].seen_ns == d.nds[i].seen_ns);
    CHECK(g.nds[i].delta == d.nds[i].delta);
    CHECK(g.nds[i].snap.inference_count == d.nds[i].snap.inference_count);
    CHECK(g.nds[i].snap.cc_s == d.nds[i].snap.cc_s);
  }
  REQUIRE(g.efa.size() == d.efa.size());
  for (size_t i = 0; i < d.efa.size(); ++i) {
    INFO("efa " << i);
    CHECK(g.efa[i].ts == d.efa[i].ts);
    CHECK(g.efa[i].v == d.efa[i].v);
  }
  REQUIRE(g.sysfs.size() == 1);
  CHECK(g.sysfs[0].v == d.sysfs[0].v);

  // The next call writes only what is new: no setup again, one new sample.
  SignalsData fresh;
  fresh.nds.push_back(d.nds.back());
  auto more = w.notes(d, fresh, 1'000'000);
  REQUIRE(more.size() == 1);
  CHECK(more[0]["note"] == "signals_nds");

  // A setup change and a renamed thread wait for the next second, or for the
  // recording's last call.
  SignalsData changed = d;
  changed.devices.emplace_back(7, "neuron7");
  changed.comms.begin()->second = "renamed";
  CHECK(w.notes(changed, SignalsData{}, SignalNoteWriter::kSetupCheckNs - 1).empty());
  auto late = w.notes(changed, SignalsData{}, SignalNoteWriter::kSetupCheckNs);
  REQUIRE(late.size() == 2);
  CHECK(late[0]["note"] == "signals_setup");
  CHECK(late[1]["note"] == "signals_threads");
  changed.devices.emplace_back(8, "neuron8");
  auto last = w.notes(changed, SignalsData{}, SignalNoteWriter::kSetupCheckNs + 1, true);
  REQUIRE(last.size() == 1);
  CHECK(last[0]["note"] == "signals_setup");
  SignalNoteReader r2;
  for (const auto& n : notes) r2.on_note(n);
  for (const auto& n : late) r2.on_note(n);
  for (const auto& n : last) r2.on_note(n);
  CHECK(r2.data().devices == changed.devices);
  CHECK(r2.data().comms == changed.comms);
}

TEST_CASE("signal notes: a replay's analysis reads them, a live one keeps its own sampler's", "[unit][signals]") {
  const SignalsData d = recorded();
  SignalNoteWriter w;
  const auto notes = w.notes(d, d, 0);
  Analysis replay;
  for (const auto& n : notes) replay.on_note(0, n);
  REQUIRE(replay.device_signals != nullptr);
  CHECK(replay.device_signals->nds.size() == d.nds.size());
  CHECK(replay.device_signals->efa_ports.size() == 1);

  SignalsData own;
  Analysis live;
  live.device_signals = &own;
  for (const auto& n : notes) live.on_note(0, n);
  CHECK(live.device_signals == &own);
  CHECK(live.replayed_signals == nullptr);
}

TEST_CASE("signal notes: a malformed note is counted and changes nothing", "[unit][signals]") {
  SignalNoteReader r;
  using nlohmann::json;
  const std::vector<json> bad = {
      {{"note", "signals_nds"}, {"s", json::array({json::array({1, 2, 3})})}},
      {{"note", "signals_nds"}, {"s", "x"}},
      {{"note", "signals_efa"}, {"s", json::array({json::array({1, 0, 3, json::array({7, 1})})})}},  // index past n
      {{"note", "signals_efa"}, {"s", json::array({json::array({1, -1, 3, json::array()})})}},  // no such port
      {{"note", "signals_efa"}, {"s", json::array({json::array({1, 0, 100000, json::array()})})}},
      {{"note", "signals_setup"}, {"dev_root", 5}},
      {{"note", "signals_sysfs"}, {"s", json::array({json::array({1, 0, json::object({{"k", "v"}})})})}},
      {{"note", "signals_threads"}, {"s", json::array({json::array({1, 2})})}},
  };
  for (const auto& n : bad) CHECK(r.on_note(n));
  CHECK(r.malformed() == bad.size());
  CHECK(r.data().nds.empty());
  CHECK(r.data().efa.empty());
  CHECK(r.data().sysfs.empty());
  CHECK(r.data().comms.empty());
  CHECK(r.data().devices.empty());
  CHECK_FALSE(r.on_note({{"note", "clock"}}));
  CHECK(r.on_note({{"note", "signals_from_the_future"}}));  // a newer kind: skipped, not malformed
  CHECK(r.malformed() == bad.size());
}
