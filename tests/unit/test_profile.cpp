// SPDX-License-Identifier: Apache-2.0
// On-CPU stack samples on the analysis side (profile/cpu_samples.h,
// attribution/sample_classes.h, export/profile_view.h): decoding and
// interning records, the paint that wins at an instant, the named view, the
// folded file and a capture's "symbols" notes.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "capture/user_note.h"
#include "export/flame_svg.h"
#include "export/perfetto.h"
#include "export/profile_view.h"
#include "pipeline/pipeline.h"

using namespace steptrace;

namespace {

std::vector<uint8_t> sample_record(uint32_t pid, uint32_t tid, uint64_t ts, std::vector<uint64_t> user,
                                   std::vector<uint64_t> kernel) {
  st_cpu_sample r{};
  r.n_user = static_cast<uint16_t>(user.size());
  r.n_kernel = static_cast<uint16_t>(kernel.size());
  const size_t n = user.size() + kernel.size();
  r.hdr.size = static_cast<uint16_t>(ST_CPU_SAMPLE_HDR_SIZE + 8 * n);
  r.hdr.kind = ST_EV_CPU_SAMPLE;
  r.hdr.ts_ns = ts;
  r.hdr.pid = pid;
  r.hdr.tid = tid;
  size_t i = 0;
  for (auto ip : user) r.ips[i++] = ip;
  for (auto ip : kernel) r.ips[i++] = ip;
  std::vector<uint8_t> b(r.hdr.size);
  std::memcpy(b.data(), &r, b.size());
  return b;
}

}  // namespace

TEST_CASE("profile: a sample record decodes to its stack, malformed ones are refused", "[profile]") {
  auto b = sample_record(10, 11, 5000, {0x401000, 0x402000}, {0xffffffff81000000ull});
  auto d = decode_cpu_sample(b.data(), b.size());
  REQUIRE(d);
  CHECK(d->sample.ts == 5000);
  CHECK(d->sample.tid == 11);
  CHECK(d->stack.user == std::vector<uint64_t>{0x401000, 0x402000});
  CHECK(d->stack.kernel == std::vector<uint64_t>{0xffffffff81000000ull});
  CHECK_FALSE(decode_cpu_sample(b.data(), 20));  // shorter than the fixed part
  auto bad = b;
  bad[24] = 3;  // n_user says three addresses, the size holds two
  CHECK_FALSE(decode_cpu_sample(bad.data(), bad.size()));
  bad = b;
  bad[24] = 200;  // past ST_SAMPLE_MAX_USER
  CHECK_FALSE(decode_cpu_sample(bad.data(), bad.size()));
  CHECK_FALSE(decode_cpu_sample(b.data(), b.size() - 8));  // the header's size runs past the bytes
}

TEST_CASE("profile: equal stacks of one process are stored once, another process's apart", "[profile]") {
  SampleStore s;
  auto a = sample_record(10, 11, 3, {0x1, 0x2}, {});
  auto c = sample_record(10, 12, 1, {0x1, 0x2}, {});
  auto o = sample_record(20, 21, 2, {0x1, 0x2}, {});
  CHECK(s.on_record(a.data(), a.size()));
  CHECK(s.on_record(c.data(), c.size()));
  CHECK(s.on_record(o.data(), o.size()));
  CHECK(s.stacks().size() == 3);  // the overflow slot and two stacks
  CHECK(s.samples()[0].stack == s.samples()[1].stack);
  CHECK(s.samples()[0].stack != s.samples()[2].stack);
  s.sort_by_time();
  CHECK(s.samples().front().ts == 1);
  s.forget_before(3);
  CHECK(s.samples().size() == 1);
  CHECK(s.stacks().size() == 3);  // stacks stay: later samples and the names point at them
  CHECK(s.sampled_pids() == std::vector<uint32_t>{10, 20});
}

TEST_CASE("profile: the paint that wins at an instant is the highest priority, then the earliest", "[profile]") {
  std::vector<Paint> p{{0, 100, 2, Category::host_overhead}, {10, 20, 9, Category::collective},
                       {15, 30, 9, Category::dma_submission}};
  CHECK(category_at(p, 5) == Category::host_overhead);
  CHECK(category_at(p, 12) == Category::collective);
  CHECK(category_at(p, 17) == Category::collective);  // both at 9: the earlier start
  CHECK(category_at(p, 25) == Category::dma_submission);
  CHECK(category_at(p, 100) == Category::other);       // ends are open
}

TEST_CASE("profile: stacks are named root first, merged across processes, and folded", "[profile]") {
  SessionReport r;
  SampleStore& s = r.analysis.samples;
  // Two processes run the same code at different addresses (ASLR).
  auto a = sample_record(10, 10, 1, {0x1010, 0x1020}, {0xffff0001});
  auto b = sample_record(20, 20, 2, {0x2010, 0x2020}, {0xffff0001});
  auto c = sample_record(10, 10, 3, {0x1030}, {});
  for (const auto* x : {&a, &b, &c}) REQUIRE(s.on_record(x->data(), x->size()));
  s.set_name(10, 0x1010, "leaf_fn");
  s.set_name(10, 0x1020, "main");
  s.set_name(20, 0x2010, "leaf_fn");
  s.set_name(20, 0x2020, "main");
  s.set_name(0, 0xffff0001, "do_syscall_64");
  r.job.profile.samples = {{1, s.samples()[0].stack, Category::host_overhead, SampleRole::main, 0},
                           {2, s.samples()[1].stack, Category::host_overhead, SampleRole::main, 1},
                           {3, s.samples()[2].stack, Category::data_loading, SampleRole::loader, 0}};
  r.job.profile.folded[{static_cast<uint8_t>(Category::data_loading), static_cast<uint8_t>(SampleRole::loader),
                        s.samples()[2].stack}] = 2;
  auto named = named_stacks(r);
  REQUIRE(named.size() == 2);
  CHECK(named[0].samples == 3);  // the unnamed 0x1030, one sample now and two folded
  CHECK(named[0].frames == std::vector<std::string>{"0x1030"});
  CHECK(named[1].samples == 2);  // pids 10 and 20 merged
  CHECK(named[1].frames == std::vector<std::string>{"main", "leaf_fn", "do_syscall_64_[k]"});
  const std::string folded = folded_text(named);
  CHECK(folded.find("host_overhead;main thread;main;leaf_fn;do_syscall_64_[k] 2\n") != std::string::npos);
  CHECK(folded.find("data_loading;data loader;0x1030 3\n") != std::string::npos);
  auto top = top_functions(named, Category::host_overhead, SampleRole::main, 5);
  // main only calls leaf_fn, which only enters the kernel: the chain ends
  // at the deepest frame, which has every sample.
  REQUIRE(top.size() == 1);
  CHECK(top[0].function == "do_syscall_64_[k]");
  CHECK(top[0].share == Approx(1.0));
  auto j = profile_json(r, named);
  CHECK(j["samples"] == 5);
  CHECK(j["groups"].size() == 2);
  CHECK(profile_text(r, named).find("host_overhead (main thread)") != std::string::npos);
}

TEST_CASE("profile: the pipeline keeps samples apart from the timeline and reads symbols notes", "[profile][pipeline]") {
  Pipeline p;
  auto a = sample_record(10, 10, 1000, {0x1010}, {});
  p.push(a.data(), a.size());
  auto bad = a;
  bad[24] = 9;
  p.push(bad.data(), bad.size());
  CHECK(p.analysis().samples.samples().size() == 1);
  CHECK(p.decode_stats().decoded[ST_EV_CPU_SAMPLE] == 1);
  CHECK(p.decode_stats().bad_size == 1);
  CHECK(p.records() == 2);
  auto note = make_user_note(2000, 0, {{"note", "symbols"}, {"names", {{10, 0x1010, "train_step"}}}});
  p.push(note.data(), note.size());
  const std::string* n = p.analysis().samples.name_of(10, 0x1010);
  REQUIRE(n);
  CHECK(*n == "train_step");
  auto broken = make_user_note(2000, 0, {{"note", "symbols"}, {"names", {{"x", 1, 2}}}});
  const uint64_t before = p.analysis().notes.malformed;
  p.push(broken.data(), broken.size());
  CHECK(p.analysis().notes.malformed == before + 1);
}

TEST_CASE("profile: the flame graph escapes names and the trace has an instant per sample", "[profile]") {
  SessionReport r;
  SampleStore& s = r.analysis.samples;
  auto a = sample_record(10, 11, 2'000'000, {0x1010, 0x1020}, {});
  REQUIRE(s.on_record(a.data(), a.size()));
  s.set_name(10, 0x1010, "f.<locals>.<genexpr> (a&b.py:9)");
  s.set_name(10, 0x1020, "main");
  r.job.profile.samples = {{2'000'000, s.samples()[0].stack, Category::data_loading, SampleRole::loader, 0}};
  auto named = named_stacks(r);
  const std::string svg = flame_svg(named, Category::data_loading, SampleRole::loader);
  CHECK(svg.find("<svg") == 0);
  CHECK(svg.find("f.&lt;locals&gt;.&lt;genexpr&gt; (a&amp;b.py:9)") != std::string::npos);
  CHECK(svg.find("<genexpr>") == std::string::npos);
  CHECK(flame_svg(named, Category::host_overhead, SampleRole::main).empty());
  CHECK(profile_html(r, named).find("In which code") != std::string::npos);
  const auto trace = perfetto_trace(r);
  bool instant = false;
  for (const auto& e : trace["traceEvents"])
    if (e.value("cat", "") == "cpu_sample") {
      instant = true;
      CHECK(e["tid"] == 11);
      CHECK(e["name"] == "f.<locals>.<genexpr> (a&b.py:9)");
      CHECK(e["args"]["category"] == "data_loading");
      CHECK(e["args"]["stack"] == "main;f.<locals>.<genexpr> (a&b.py:9)");
    }
  CHECK(instant);
}

TEST_CASE("profile: top functions skip pass-through frames and keep the callers that tell a shared callee apart",
          "[profile]") {
  std::vector<NamedStack> st{
      {Category::host_overhead, SampleRole::main, {"main", "loop", "phase_a", "kernel_fn"}, 60},
      {Category::host_overhead, SampleRole::main, {"main", "loop", "phase_b", "kernel_fn"}, 35},
      {Category::host_overhead, SampleRole::main, {"main", "loop"}, 5}};
  auto top = top_functions(st, Category::host_overhead, SampleRole::main, 10);
  std::vector<std::string> names;
  for (const auto& f : top) names.push_back(f.function);
  // main hands everything to loop, which runs for nobody else: left out.
  // loop splits its time (and runs itself): kept; phase_a and phase_b share
  // kernel_fn: kept.
  CHECK(names == std::vector<std::string>{"loop", "kernel_fn", "phase_a", "phase_b"});
  CHECK(top[2].share == Approx(0.60));
}
