// SPDX-License-Identifier: Apache-2.0
// The EFA control path (uverbs calls) as setup events: naming from the ioctl
// object/method or the legacy command, and placing each call before, inside
// or after the steps, on records fed through the decoder and the timeline.
#include <catch2/catch.hpp>

#include <cstring>

#include "attribution/fabric_setup.h"
#include "attribution/job_analysis.h"
#include "decode/decoder.h"
#include "rdma_uapi.h"
#include "timeline/timeline_store.h"

using namespace steptrace;

namespace {

st_rdma_verb verb(uint32_t pid, uint64_t enter, uint64_t ret_ts, uint16_t obj, uint16_t meth, uint32_t write_cmd,
                  uint64_t bytes, int64_t ret = 0) {
  st_rdma_verb v{};
  v.hdr.size = sizeof(v);
  v.hdr.kind = ST_EV_RDMA_VERB;
  v.hdr.pid = pid;
  v.hdr.tid = pid;
  v.hdr.ts_ns = ret_ts;
  v.enter_ts = enter;
  v.object_id = obj;
  v.method_id = meth;
  v.write_cmd = write_cmd;
  v.bytes = bytes;
  v.ret = ret;
  return v;
}

// Through the decoder, as a ring buffer record would come.
void feed(TimelineStore& tl, const st_rdma_verb& v) {
  Decoder d;
  auto e = d.decode(&v, sizeof(v));
  REQUIRE(e.has_value());
  REQUIRE(std::holds_alternative<st_rdma_verb>(*e));
  tl.on_event(*e);
}

const VerbStats* find(const FabricPhase& p, const std::string& name) {
  for (const auto& v : p.verbs)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace

TEST_CASE("uverbs: calls are named from the ioctl object/method or the legacy command", "[fabric]") {
  CHECK(rdma_verb_info(UVERBS_OBJ_MR, UVERBS_METH_REG_DMABUF_MR, ST_RDMA_NO_CMD).name == "reg_dmabuf_mr");
  CHECK(rdma_verb_info(UVERBS_OBJ_MR, UVERBS_METH_REG_DMABUF_MR, ST_RDMA_NO_CMD).group ==
        VerbGroup::memory_registration);
  CHECK(rdma_verb_info(UVERBS_OBJ_QP, UVERBS_METH_CREATE, ST_RDMA_NO_CMD).name == "create_qp");
  CHECK(rdma_verb_info(UVERBS_OBJ_QP, UVERBS_METH_CREATE, ST_RDMA_NO_CMD).group == VerbGroup::queues);
  CHECK(rdma_verb_info(UVERBS_OBJ_CQ, UVERBS_METH_DESTROY, ST_RDMA_NO_CMD).name == "destroy_cq");
  CHECK(rdma_verb_info(UVERBS_OBJ_PD, 0, ST_RDMA_NO_CMD).name == "dealloc_pd");
  // INVOKE_WRITE and write(2) carry the legacy command number.
  CHECK(rdma_verb_info(UVERBS_OBJ_DEVICE, UVERBS_METH_INVOKE_WRITE, UVERBS_CMD_REG_MR).name == "reg_mr");
  CHECK(rdma_verb_info(0, 0, UVERBS_CMD_GET_CONTEXT).name == "get_context");
  CHECK(rdma_verb_info(0, 0, UVERBS_CMD_CREATE_QP).name == "create_qp");
  // The EFA driver's own methods (namespace bit 12) and unknown ids stay visible.
  CHECK(rdma_verb_info(UVERBS_OBJ_MR, 0x1000, ST_RDMA_NO_CMD).name.find("driver_method") == 0);
  CHECK(rdma_verb_info(42, 7, ST_RDMA_NO_CMD).name == "object_42_method_7");
  CHECK(rdma_verb_info(0, 0, 200).name == "write_cmd_200");
}

TEST_CASE("uverbs: setup, in-step and teardown calls are told apart and counted per step", "[fabric]") {
  const uint32_t pid = 100;
  const uint64_t ms = 1'000'000;
  TimelineStore tl;
  // Setup before the first step (t < 100 ms): a queue pair and a registration.
  feed(tl, verb(pid, 10 * ms, 12 * ms, UVERBS_OBJ_QP, UVERBS_METH_CREATE, ST_RDMA_NO_CMD, 0));
  feed(tl, verb(pid, 20 * ms, 25 * ms, UVERBS_OBJ_MR, UVERBS_METH_REG_DMABUF_MR, ST_RDMA_NO_CMD, 64 << 20));
  // Steps: [100,200) [200,300) [300,400); a registration in steps 1 and 2, one failed.
  feed(tl, verb(pid, 150 * ms, 151 * ms, UVERBS_OBJ_DEVICE, 0, UVERBS_CMD_REG_MR, 8 << 20));
  feed(tl, verb(pid, 250 * ms, 252 * ms, UVERBS_OBJ_DEVICE, 0, UVERBS_CMD_REG_MR, 8 << 20));
  feed(tl, verb(pid, 260 * ms, 261 * ms, UVERBS_OBJ_DEVICE, 0, UVERBS_CMD_REG_MR, 8 << 20, -12));
  feed(tl, verb(pid, 350 * ms, 351 * ms, 0, 0, UVERBS_CMD_DEREG_MR, 0));
  // Teardown after the last step.
  feed(tl, verb(pid, 500 * ms, 503 * ms, UVERBS_OBJ_QP, UVERBS_METH_DESTROY, ST_RDMA_NO_CMD, 0));
  // Another process's call is not this rank's.
  feed(tl, verb(pid + 1, 150 * ms, 160 * ms, UVERBS_OBJ_QP, UVERBS_METH_CREATE, ST_RDMA_NO_CMD, 0));
  tl.finish(600 * ms);

  RankResult r;
  r.pid = pid;
  for (int i = 0; i < 3; ++i) {
    StepResult st;
    st.index = i;
    st.start_ns = static_cast<uint64_t>(100 + 100 * i) * ms;
    st.end_ns = st.start_ns + 100 * ms;
    r.steps.push_back(st);
  }
  std::vector<RankResult*> rr{&r};
  FabricSummary f = summarize_fabric(tl, rr, 1);
  REQUIRE(f.ranks.size() == 2);
  const auto& rf = f.ranks[0];
  CHECK(rf.setup.calls == 2);
  CHECK(rf.setup.total_ns == 7 * ms);
  CHECK(rf.setup.bytes == (64u << 20));
  REQUIRE(find(rf.setup, "reg_dmabuf_mr") != nullptr);
  CHECK(rf.in_steps.calls == 4);
  CHECK(rf.in_steps.errors == 1);
  REQUIRE(find(rf.in_steps, "reg_mr") != nullptr);
  CHECK(find(rf.in_steps, "reg_mr")->calls == 3);
  CHECK(find(rf.in_steps, "reg_mr")->bytes == (16u << 20));  // the failed one registered nothing
  CHECK(find(rf.in_steps, "dereg_mr") != nullptr);
  CHECK(rf.teardown.calls == 1);
  CHECK(rf.counted_steps == 2);
  CHECK(rf.counted_steps_with_calls == 2);
  CHECK(r.steps[0].fabric_calls == 1);
  CHECK(r.steps[1].fabric_calls == 2);
  CHECK(r.steps[1].fabric_ns == 3 * ms);
  CHECK(r.steps[1].fabric_reg_bytes == (8u << 20));
  CHECK(r.steps[2].fabric_calls == 1);
  // The other process is listed after the ranks, every call as setup.
  CHECK(f.ranks[1].rank == -1);
  CHECK(f.ranks[1].pid == pid + 1);
  CHECK(f.ranks[1].setup.calls == 1);
  CHECK(f.ranks[1].in_steps.calls == 0);
  CHECK(f.calls() == 8);
}
