// SPDX-License-Identifier: Apache-2.0
// Block request ownership (bpf/rq_track.h, the code block.bpf.c runs),
// compiled natively and driven through the tracepoint sequences the block
// layer produces. st_rq is modelled as a map from request address to entry,
// with the same store/delete rules block.bpf.c applies.
#include <linux/types.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <optional>

#include "rq_track.h"

namespace {

struct Owner {
  uint32_t pid, tid;
};

// The BPF side of block.bpf.c, over a std::map instead of st_rq.
class RqMap {
 public:
  // block_rq_insert / block_rq_issue in the context of `who` (nullopt: not a target).
  void begin(uint64_t rq, bool issue, std::optional<Owner> who, uint64_t now) {
    auto it = m_.find(rq);
    const st_rq_state* cur = it == m_.end() ? nullptr : &it->second;
    st_rq_state next{};
    int stale = 0;
    Owner o = who.value_or(Owner{999, 999});
    switch (st_rq_step(cur, issue ? 1 : 0, who ? 1 : 0, o.pid, o.tid, now, &next, &stale)) {
      case ST_RQA_CONTINUE: it->second = next; break;
      case ST_RQA_START: m_[rq] = next; break;
      case ST_RQA_FORGET: m_.erase(it); break;
      case ST_RQA_NONE: break;
    }
    stale_ += static_cast<uint64_t>(stale);
  }
  void insert(uint64_t rq, std::optional<Owner> who, uint64_t now) { begin(rq, false, who, now); }
  void issue(uint64_t rq, std::optional<Owner> who, uint64_t now) { begin(rq, true, who, now); }
  void requeue(uint64_t rq) {
    if (auto it = m_.find(rq); it != m_.end()) st_rq_requeued(&it->second);
  }
  void merge(uint64_t rq) { m_.erase(rq); }
  // block_rq_complete: the record's owner, if any; the entry is forgotten.
  std::optional<st_rq_state> complete(uint64_t rq) {
    auto it = m_.find(rq);
    if (it == m_.end()) return std::nullopt;
    st_rq_state s = it->second;
    m_.erase(it);
    return s;
  }
  size_t size() const { return m_.size(); }
  uint64_t stale() const { return stale_; }

 private:
  std::map<uint64_t, st_rq_state> m_;
  uint64_t stale_ = 0;
};

constexpr uint64_t kRq = 0xffff888012345600ull;  // one request struct, reused
const Owner kA{100, 101};                        // a traced thread
const Owner kC{300, 303};                        // another traced thread
const std::optional<Owner> kUntraced;            // a process that is not traced

}  // namespace

TEST_CASE("rq_track: a target's request keeps its submitter from insert or issue to completion", "[rq_track]") {
  RqMap m;
  // Through the scheduler: inserted by the target, dispatched by kblockd.
  m.insert(kRq, kA, 10);
  m.issue(kRq, kUntraced, 20);
  auto r = m.complete(kRq);
  REQUIRE(r);
  CHECK(r->tid == kA.tid);
  CHECK(r->pid == kA.pid);
  CHECK(r->insert_ts == 10);
  CHECK(r->issue_ts == 20);
  // Issued directly (no scheduler).
  m.issue(kRq, kA, 30);
  r = m.complete(kRq);
  REQUIRE(r);
  CHECK(r->tid == kA.tid);
  CHECK(r->insert_ts == 0);
  CHECK(r->issue_ts == 30);
  CHECK(m.size() == 0);
  CHECK(m.stale() == 0);
}

TEST_CASE("rq_track: a requeued request is still its submitter's when a worker inserts and issues it again",
          "[rq_track]") {
  RqMap m;
  m.issue(kRq, kA, 10);
  m.requeue(kRq);                 // driver busy
  m.insert(kRq, kUntraced, 20);   // kblockd's requeue work
  m.issue(kRq, kUntraced, 30);
  auto r = m.complete(kRq);
  REQUIRE(r);
  CHECK(r->tid == kA.tid);
  CHECK(r->issue_ts == 30);
  // Requeued and issued straight from the dispatch list, no insert.
  m.insert(kRq, kA, 40);
  m.issue(kRq, kUntraced, 50);
  m.requeue(kRq);
  m.issue(kRq, kUntraced, 60);
  r = m.complete(kRq);
  REQUIRE(r);
  CHECK(r->tid == kA.tid);
  CHECK(r->insert_ts == 40);
  CHECK(m.stale() == 0);
}

TEST_CASE("rq_track: a reused request address never inherits a stale owner", "[rq_track]") {
  RqMap m;
  SECTION("merged away after insert, then reused by an untraced process's direct issue") {
    m.insert(kRq, kA, 10);
    m.merge(kRq);  // block_rq_merge: freed without completion
    m.issue(kRq, kUntraced, 20);
    CHECK_FALSE(m.complete(kRq));
  }
  SECTION("never completed after insert (no merge seen), reused by an untraced insert") {
    m.insert(kRq, kA, 10);
    m.insert(kRq, kUntraced, 20);
    m.issue(kRq, kUntraced, 30);
    CHECK_FALSE(m.complete(kRq));
    CHECK(m.stale() == 1);
  }
  SECTION("never completed after issue, reused by an untraced direct issue") {
    m.issue(kRq, kA, 10);
    m.issue(kRq, kUntraced, 20);
    CHECK_FALSE(m.complete(kRq));
    CHECK(m.stale() == 1);
  }
  SECTION("never completed after issue, reused by an untraced insert and dispatch") {
    m.insert(kRq, kA, 5);
    m.issue(kRq, kA, 10);
    m.insert(kRq, kUntraced, 20);
    m.issue(kRq, kUntraced, 30);
    CHECK_FALSE(m.complete(kRq));
  }
  SECTION("reused by another traced thread: its own tid and times, not the old ones") {
    m.issue(kRq, kA, 10);
    m.insert(kRq, kC, 20);
    m.issue(kRq, kUntraced, 30);
    auto r = m.complete(kRq);
    REQUIRE(r);
    CHECK(r->tid == kC.tid);
    CHECK(r->pid == kC.pid);
    CHECK(r->insert_ts == 20);
    CHECK(r->issue_ts == 30);
    CHECK(m.stale() == 1);
  }
  // Whatever happened, nothing is left behind for the next request.
  m.complete(kRq);
  CHECK(m.size() == 0);
}
