// SPDX-License-Identifier: Apache-2.0
#include "decode/rdma_verb.h"

#include <fmt/core.h>

#include "rdma_uapi.h"
#include "steptrace_abi.h"

namespace steptrace {

std::string_view verb_group_name(VerbGroup g) {
  switch (g) {
    case VerbGroup::memory_registration: return "memory registration";
    case VerbGroup::queues: return "queues";
    case VerbGroup::context: return "context";
    case VerbGroup::query: return "query";
    case VerbGroup::other: break;
  }
  return "other";
}

namespace {

VerbInfo legacy(uint32_t cmd) {
  using G = VerbGroup;
  switch (cmd) {
    case UVERBS_CMD_GET_CONTEXT: return {"get_context", G::context};
    case UVERBS_CMD_QUERY_DEVICE: return {"query_device", G::query};
    case UVERBS_CMD_QUERY_PORT: return {"query_port", G::query};
    case UVERBS_CMD_ALLOC_PD: return {"alloc_pd", G::context};
    case UVERBS_CMD_DEALLOC_PD: return {"dealloc_pd", G::context};
    case UVERBS_CMD_CREATE_AH: return {"create_ah", G::context};
    case UVERBS_CMD_DESTROY_AH: return {"destroy_ah", G::context};
    case UVERBS_CMD_REG_MR: return {"reg_mr", G::memory_registration};
    case UVERBS_CMD_DEREG_MR: return {"dereg_mr", G::memory_registration};
    case UVERBS_CMD_CREATE_COMP_CHANNEL: return {"create_comp_channel", G::queues};
    case UVERBS_CMD_CREATE_CQ: return {"create_cq", G::queues};
    case UVERBS_CMD_DESTROY_CQ: return {"destroy_cq", G::queues};
    case UVERBS_CMD_CREATE_QP: return {"create_qp", G::queues};
    case UVERBS_CMD_QUERY_QP: return {"query_qp", G::query};
    case UVERBS_CMD_MODIFY_QP: return {"modify_qp", G::queues};
    case UVERBS_CMD_DESTROY_QP: return {"destroy_qp", G::queues};
    default: return {fmt::format("write_cmd_{}", cmd), G::other};
  }
}

}  // namespace

VerbInfo rdma_verb_info(uint32_t object, uint32_t method, uint32_t write_cmd) {
  using G = VerbGroup;
  if (write_cmd != ST_RDMA_NO_CMD) return legacy(write_cmd);
  // Ids with bit 12 set belong to the driver's namespace (EFA's own methods).
  if (method & 0x1000) return {fmt::format("driver_method_{}_{:#x}", object, method), G::other};
  switch (object) {
    case UVERBS_OBJ_DEVICE:
      if (method == UVERBS_METH_GET_CONTEXT) return {"get_context", G::context};
      if (method == UVERBS_METH_QUERY_PORT) return {"query_port", G::query};
      if (method == 1 || method == 4) return {method == 1 ? "info_handles" : "query_context", G::query};
      break;
    case UVERBS_OBJ_PD:
      if (method == 0) return {"dealloc_pd", G::context};
      break;
    case UVERBS_OBJ_CQ:
      if (method == UVERBS_METH_CREATE) return {"create_cq", G::queues};
      if (method == UVERBS_METH_DESTROY) return {"destroy_cq", G::queues};
      break;
    case UVERBS_OBJ_QP:
      if (method == UVERBS_METH_CREATE) return {"create_qp", G::queues};
      if (method == UVERBS_METH_DESTROY) return {"destroy_qp", G::queues};
      break;
    case UVERBS_OBJ_AH:
      if (method == 0) return {"destroy_ah", G::context};
      break;
    case UVERBS_OBJ_MR:
      switch (method) {
        case 0: return {"dm_mr_reg", G::memory_registration};
        case UVERBS_METH_MR_DESTROY: return {"dereg_mr", G::memory_registration};
        case 2: return {"advise_mr", G::memory_registration};
        case 3: return {"query_mr", G::query};
        case UVERBS_METH_REG_DMABUF_MR: return {"reg_dmabuf_mr", G::memory_registration};
        default: break;
      }
      break;
    default: break;
  }
  return {fmt::format("object_{}_method_{}", object, method), G::other};
}

}  // namespace steptrace
