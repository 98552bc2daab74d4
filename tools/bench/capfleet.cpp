// SPDX-License-Identifier: Apache-2.0
// capfleet: the captures of a job on N nodes, made from the two node captures
// of a real two-node recording (tools/bench/merge_files.sh records one:
// trainsim's job over a veth link, one recorder per node), as the input of
// the merge benchmark at fleet scale (`steptrace report` over N files).
//
// Node k of N (N even) is source node k mod 2's capture, rewritten:
//  - its ranks: C copies of the source's processes. Copy j's pids and tids
//    move by j * 2^22 (past any pid the kernel hands out) and its CPUs by
//    j * the source's CPU count (each copy on CPUs of its own, as the ranks of
//    a large node are). The launcher's variables are rewritten: RANK,
//    LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, WORLD_SIZE.
//  - its network: the sources' node addresses become node k's and its ring
//    neighbours' (node k is 10.hi.lo.1, its loopback 127.hi.lo.1, hi.lo = k),
//    so that each link carries byte streams of its own. Copy 0's sockets to
//    the other node lead to the next node of the ring, copy 1's to the
//    previous one: each link then carries the source pair's streams both
//    ways (node k's copy 0 and node k+1's copy 1 hold the two ends of the
//    same bytes), which the clock fit needs. The other copies' sockets get
//    ids of their own and no stream positions or arrivals (their bytes would
//    repeat those of copies 0 and 1).
//  - its clock (node 0 keeps the recording's): an offset, a drift and a wall
//    clock error of its own (capture_shift.h), a boot id and a host name of
//    its own. The session's own notes (clock anchors, device signals) are
//    written once, not per copy.
// Pairs of nodes repeat the source pair: the job's straggler (if the source
// has one) is on every odd node.
//
//   capfleet NODE0.cap NODE1.cap OUTDIR --nodes N [--copies C]
// Writes OUTDIR/node<k>.cap and OUTDIR/fleet.json (each node's planted
// clock, its ranks, its records). Exit 2 on bad arguments, 1 on a read or
// write error.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capture/capture_file.h"
#include "capture/user_note.h"
#include "capture_shift.h"
#include "steptrace_abi.h"

using namespace steptrace;

namespace {

constexpr const char* kUsage = "usage: capfleet NODE0.cap NODE1.cap OUTDIR --nodes N [--copies C]";
constexpr uint32_t kPidStride = 1u << 22;  // PID_MAX_LIMIT: no real pid reaches it
constexpr uint64_t kNs = 1'000'000'000;

struct Args {
  std::string src[2], out_dir;
  int nodes = 0, copies = 2;
};

bool parse_int(const char* s, int& v, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(s, &end, 10);
  if (errno || !*s || *end || x < lo || x > hi) return false;
  v = static_cast<int>(x);
  return true;
}

std::string parse_args(int argc, char** argv, Args& a) {
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--nodes" || arg == "--copies") {
      if (i + 1 >= argc) return arg + " needs a value";
      if (!parse_int(argv[++i], arg == "--nodes" ? a.nodes : a.copies, arg == "--nodes" ? 2 : 1,
                     arg == "--nodes" ? 65534 : 1000))
        return arg + ": not an integer in range: " + argv[i];
    } else if (arg.rfind("--", 0) == 0) {
      return "unknown option " + arg;
    } else {
      pos.push_back(arg);
    }
  }
  if (pos.size() != 3) return "expected NODE0.cap NODE1.cap OUTDIR";
  if (a.nodes < 2 || a.nodes % 2) return "--nodes: an even number >= 2 (the source pair repeats)";
  if (a.copies < 2) return "--copies: at least 2 (copies 0 and 1 carry the links' two directions)";
  a.src[0] = pos[0];
  a.src[1] = pos[1];
  a.out_dir = pos[2];
  return "";
}

// What the rewrite needs to know of one source capture, from a first pass.
struct Source {
  CaptureContents contents;
  uint32_t ncpu = 1;                             // highest CPU seen + 1
  uint64_t t0 = 0, t_last = 0;                   // first and last record's time
  std::map<uint32_t, nlohmann::json> env;        // pid -> launcher variables (identity notes)
  std::set<std::vector<uint8_t>> own_addrs;      // the node's non-loopback local addresses
  int local_world = 1;                           // LOCAL_WORLD_SIZE, or the ranks seen
};

bool is_v4_mapped(const uint8_t* a) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(a, prefix, 12) == 0;
}
bool is_loopback(const uint8_t* a) { return is_v4_mapped(a) && a[12] == 127; }

int env_int(const nlohmann::json& env, const char* k, int dflt) {
  auto it = env.find(k);
  if (it == env.end() || !it->is_string()) return dflt;
  char* end = nullptr;
  long v = std::strtol(it->get_ref<const std::string&>().c_str(), &end, 10);
  return *end ? dflt : static_cast<int>(v);
}

// A record's socket tuple and id, where it has one.
st_sock_tuple* tuple_of(std::vector<uint8_t>& b, uint16_t kind, uint64_t** sock_id) {
  switch (kind) {
    case ST_EV_NET_XFER:
      *sock_id = reinterpret_cast<uint64_t*>(b.data() + offsetof(st_net_xfer, sock_id));
      return reinterpret_cast<st_sock_tuple*>(b.data() + offsetof(st_net_xfer, tuple));
    case ST_EV_TCP_RETRANSMIT:
      *sock_id = reinterpret_cast<uint64_t*>(b.data() + offsetof(st_tcp_retransmit, sock_id));
      return reinterpret_cast<st_sock_tuple*>(b.data() + offsetof(st_tcp_retransmit, tuple));
    case ST_EV_TCP_STATE:
      *sock_id = reinterpret_cast<uint64_t*>(b.data() + offsetof(st_tcp_state, sock_id));
      return reinterpret_cast<st_sock_tuple*>(b.data() + offsetof(st_tcp_state, tuple));
    default: return nullptr;
  }
}

std::string learn(const std::string& path, Source& s) {
  std::set<int> local_ranks;
  auto c = read_capture(path, [&](const void* d, size_t len) {
    if (len < sizeof(st_event_header)) return;
    st_event_header h;
    std::memcpy(&h, d, sizeof(h));
    if (h.size > len || h.size < record_min_size(h.kind)) return;
    if (!s.t0) s.t0 = h.ts_ns;
    if (h.kind != ST_EV_USER_NOTE) {
      s.ncpu = std::max(s.ncpu, h.cpu + 1);
      s.t_last = std::max<uint64_t>(s.t_last, h.ts_ns);
    }
    if (h.kind == ST_EV_USER_NOTE) {
      auto note = parse_user_note(d, len);
      if (note && note->value("note", "") == "identity" && note->contains("env") && (*note)["env"].is_object()) {
        s.env[h.pid] = (*note)["env"];
        local_ranks.insert(env_int((*note)["env"], "LOCAL_RANK", 0));
      }
    } else if (h.kind == ST_EV_NET_XFER && h.size >= sizeof(st_net_xfer)) {
      st_net_xfer n;
      std::memcpy(&n, d, sizeof(n));
      if (!is_loopback(n.tuple.saddr)) s.own_addrs.insert({n.tuple.saddr, n.tuple.saddr + 16});
    }
  });
  if (!c) return c.error().message;
  s.contents = std::move(*c);
  for (const auto& [pid, env] : s.env) s.local_world = std::max(s.local_world, env_int(env, "LOCAL_WORLD_SIZE", 1));
  s.local_world = std::max<int>(s.local_world, static_cast<int>(local_ranks.size()));
  if (!s.t0) return path + ": no records";
  return "";
}

void set_v4(uint8_t* a, uint8_t b0, int node) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  std::memcpy(a, prefix, 12);
  a[12] = b0;
  a[13] = static_cast<uint8_t>(node >> 8);
  a[14] = static_cast<uint8_t>(node);
  a[15] = 1;
}

// Node k's view of one copy of the source: how every pid, CPU, address and
// launcher variable is rewritten.
struct NodeMap {
  const Source* src = nullptr;
  int node = 0, nodes = 0, copies = 1, copy = 0;

  uint32_t pid(uint32_t p) const { return p ? p + static_cast<uint32_t>(copy) * kPidStride : 0; }
  uint32_t cpu(uint32_t c) const { return c + static_cast<uint32_t>(copy) * src->ncpu; }
  int next() const { return (node + 1) % nodes; }
  int prev() const { return (node + nodes - 1) % nodes; }

  void address(uint8_t* a) const {
    if (!is_v4_mapped(a)) return;
    if (a[12] == 127)
      set_v4(a, 127, node);
    else
      set_v4(a, 10, src->own_addrs.count({a, a + 16}) ? node : copy == 1 ? prev() : next());
  }
  // Copies 0 and 1 carry the links' stream positions (to the next and the previous node).
  bool keeps_positions() const { return copy < 2; }

  nlohmann::json env(nlohmann::json e) const {
    const int local = copy * src->local_world + env_int(e, "LOCAL_RANK", 0);
    const int per_node = copies * src->local_world;
    auto set = [&e](const char* k, int v) {
      if (e.contains(k)) e[k] = std::to_string(v);
    };
    e["RANK"] = std::to_string(node * per_node + local);
    e["WORLD_SIZE"] = std::to_string(nodes * per_node);
    e["LOCAL_RANK"] = std::to_string(local);
    e["LOCAL_WORLD_SIZE"] = std::to_string(per_node);
    e["GROUP_RANK"] = std::to_string(node);
    set("NODE_RANK", node);
    set("SLURM_NODEID", node);
    set("SLURM_PROCID", node * per_node + local);
    return e;
  }
};

struct NodeCounts {
  uint64_t records = 0, dropped_positions = 0, dropped_arrivals = 0;
};

// Copy `m.copy` of one source record into `b` (already a copy of it); false
// when this copy does not carry the record.
bool rewrite(std::vector<uint8_t>& b, const NodeMap& m, NodeCounts& n) {
  st_event_header h;
  std::memcpy(&h, b.data(), sizeof(h));
  if (h.kind == ST_EV_USER_NOTE) {
    auto note = parse_user_note(b.data(), b.size());
    const std::string type = note ? note->value("note", "") : "";
    const bool per_process = type == "identity" || type == "parent" || type == "lib_probe" || type == "symbols";
    if (!per_process) return m.copy == 0;  // the session's notes: clock anchors, device signals
    if (m.copy == 0 && type != "identity") return true;
    if (type == "identity" && note->contains("env") && (*note)["env"].is_object())
      (*note)["env"] = m.env((*note)["env"]);
    if (type == "parent") {
      auto p = note->find("ppid");
      if (p != note->end() && p->is_number_unsigned()) *p = m.pid(p->get<uint32_t>());
    }
    auto rec = make_user_note(h.ts_ns, m.pid(h.pid), *note);
    if (rec.empty()) return false;
    st_event_header nh;
    std::memcpy(&nh, rec.data(), sizeof(nh));
    nh.cpu = h.cpu;
    nh.tid = m.pid(h.tid);
    std::memcpy(rec.data(), &nh, sizeof(nh));
    b = std::move(rec);
    return true;
  }
  h.pid = m.pid(h.pid);
  h.tid = m.pid(h.tid);
  h.cpu = m.cpu(h.cpu);
  std::memcpy(b.data(), &h, sizeof(h));
  auto put32 = [&b](size_t off, uint32_t v) { std::memcpy(b.data() + off, &v, sizeof(v)); };
  auto get32 = [&b](size_t off) {
    uint32_t v;
    std::memcpy(&v, b.data() + off, sizeof(v));
    return v;
  };
  switch (h.kind) {
    case ST_EV_SCHED_SWITCH:
      put32(offsetof(st_sched_switch, next_pid), m.pid(get32(offsetof(st_sched_switch, next_pid))));
      put32(offsetof(st_sched_switch, next_tid), m.pid(get32(offsetof(st_sched_switch, next_tid))));
      break;
    case ST_EV_SCHED_WAKEUP:
      put32(offsetof(st_sched_wakeup, waker_pid), m.pid(get32(offsetof(st_sched_wakeup, waker_pid))));
      put32(offsetof(st_sched_wakeup, waker_tid), m.pid(get32(offsetof(st_sched_wakeup, waker_tid))));
      put32(offsetof(st_sched_wakeup, target_cpu), m.cpu(get32(offsetof(st_sched_wakeup, target_cpu))));
      break;
    case ST_EV_TASK_NEW:
      put32(offsetof(st_task_new, child_pid), m.pid(get32(offsetof(st_task_new, child_pid))));
      put32(offsetof(st_task_new, child_tid), m.pid(get32(offsetof(st_task_new, child_tid))));
      break;
    case ST_EV_NET_XFER:
    case ST_EV_TCP_RETRANSMIT:
    case ST_EV_TCP_STATE: {
      uint64_t* sock_id = nullptr;
      st_sock_tuple* t = tuple_of(b, h.kind, &sock_id);
      uint64_t id;
      std::memcpy(&id, sock_id, sizeof(id));
      st_sock_tuple tu;
      std::memcpy(&tu, t, sizeof(tu));
      m.address(tu.saddr);
      m.address(tu.daddr);
      std::memcpy(t, &tu, sizeof(tu));
      if (m.copy == 0) break;
      id ^= static_cast<uint64_t>(m.copy) << 48;
      std::memcpy(sock_id, &id, sizeof(id));
      if (m.keeps_positions()) break;
      if (h.kind == ST_EV_NET_XFER && b.size() >= sizeof(st_net_xfer)) {
        const uint32_t flags = get32(offsetof(st_net_xfer, flags));
        if (flags & ST_NET_ARRIVAL) {
          ++n.dropped_arrivals;
          return false;
        }
        if (flags & ST_NET_SEQ_VALID) ++n.dropped_positions;
        put32(offsetof(st_net_xfer, flags), 0);
      }
      break;
    }
    default: break;
  }
  return true;
}

// Node k's planted clock: deterministic, spread over a few seconds of offset,
// +-40 ppm of drift and +-1 ms of wall-clock error.
ShiftSpec node_clock(int k, const std::string& source, const std::string& boot_id) {
  ShiftSpec s;
  s.source = source;
  if (k == 0) return s;
  s.offset_ns = static_cast<int64_t>(k % 7) * static_cast<int64_t>(kNs) + k * 137'000'003LL;
  s.ppm = static_cast<double>((k * 37) % 81 - 40);
  s.wall_error_ns = static_cast<int64_t>((k * 7919) % 2001 - 1000) * 1000;
  s.boot_id = boot_id + "-node" + std::to_string(k);
  return s;
}

std::string write_node(const Args& a, const Source& src, int k, nlohmann::json& manifest) {
  const std::string path = a.out_dir + "/node" + std::to_string(k) + ".cap";
  const std::string boot = src.contents.meta.value("boot_id", std::string("unknown-boot"));
  ShiftSpec spec = node_clock(k, a.src[k % 2], boot);
  ClockShift clk;
  clk.t0 = src.t0;
  clk.offset_ns = spec.offset_ns;
  clk.ppm = spec.ppm;
  nlohmann::json meta;
  if (k == 0) {
    meta = src.contents.meta;
  } else if (auto e = shift_meta(src.contents, spec, clk, meta); !e.empty()) {
    return e;
  }
  meta["host"] = "node-" + std::to_string(k);
  nlohmann::json pids = nlohmann::json::array();
  if (auto p = src.contents.meta.find("pids"); p != src.contents.meta.end() && p->is_array())
    for (int j = 0; j < a.copies; ++j)
      for (const auto& x : *p)
        if (x.is_number_unsigned()) pids.push_back(x.get<uint32_t>() + static_cast<uint32_t>(j) * kPidStride);
  meta["pids"] = pids;
  meta["capfleet"] = {{"source", a.src[k % 2]}, {"node", k}, {"nodes", a.nodes}, {"copies", a.copies}};
  CaptureWriterOptions opt;
  opt.overwrite = true;
  auto w = CaptureWriter::create(path, meta, opt);
  if (!w) return w.error().message;
  std::unique_ptr<CaptureWriter> writer = std::move(*w);
  NodeMap m{&src, k, a.nodes, a.copies, 0};
  NodeCounts n;
  ShiftCounts shifted;
  std::string error;
  uint64_t newest = 0;
  auto in = read_capture(a.src[k % 2], [&](const void* d, size_t len) {
    if (!error.empty() || len < sizeof(st_event_header)) return;
    st_event_header h;
    std::memcpy(&h, d, sizeof(h));
    if (h.size > len || h.size < sizeof(h) || h.size < record_min_size(h.kind)) return;  // as capshift: unusable
    for (int j = 0; j < a.copies; ++j) {
      m.copy = j;
      std::vector<uint8_t> b(static_cast<const uint8_t*>(d), static_cast<const uint8_t*>(d) + h.size);
      if (!rewrite(b, m, n)) continue;
      if (k) shift_record(b, clk, spec, shifted);
      std::memcpy(&h, b.data(), sizeof(h));
      if (h.kind != ST_EV_USER_NOTE) newest = std::max<uint64_t>(newest, h.ts_ns);
      if (auto st = writer->append(b.data(), b.size()); !st) {
        error = st.error().message;
        return;
      }
      ++n.records;
    }
  });
  if (!in) return in.error().message;
  if (!error.empty()) return error;
  if (clk.bad) return "the planted clock takes a timestamp out of range";
  DropStats drops = in->drops;  // as if every copy lost what the source did
  for (size_t i = 0; i < ST_EV_KIND_MAX; ++i) {
    drops.emitted[i] *= static_cast<uint64_t>(a.copies);
    drops.dropped[i] *= static_cast<uint64_t>(a.copies);
  }
  uint64_t end = in->window_end_ns && *in->window_end_ns ? *in->window_end_ns : 0;
  end = end && k ? clk(end) : (end ? end : newest);
  if (auto st = writer->close(drops, end, in->end.empty() ? std::string(kCaptureComplete) : in->end); !st)
    return st.error().message;
  manifest["nodes"].push_back({{"node", k},
                               {"path", path},
                               {"source", a.src[k % 2]},
                               {"t0_ns", clk.t0},
                               {"source_span_ns", src.t_last > src.t0 ? src.t_last - src.t0 : 0},
                               {"offset_ns", spec.offset_ns},
                               {"ppm", spec.ppm},
                               {"wall_error_ns", spec.wall_error_ns},
                               {"ranks", a.copies * src.local_world},
                               {"records", n.records},
                               {"stream_positions_dropped", n.dropped_positions},
                               {"arrivals_dropped", n.dropped_arrivals}});
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto e = parse_args(argc, argv, a); !e.empty()) {
    std::fprintf(stderr, "capfleet: %s (%s)\n", e.c_str(), kUsage);
    return 2;
  }
  Source src[2];
  for (int s = 0; s < 2; ++s)
    if (auto e = learn(a.src[s], src[s]); !e.empty()) {
      std::fprintf(stderr, "capfleet: %s\n", e.c_str());
      return 1;
    }
  if (src[0].local_world != src[1].local_world) {
    std::fprintf(stderr, "capfleet: the two nodes hold %d and %d ranks: one job's nodes hold as many each\n",
                 src[0].local_world, src[1].local_world);
    return 2;
  }
  if (::mkdir(a.out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "capfleet: %s: %s\n", a.out_dir.c_str(), std::strerror(errno));
    return 1;
  }
  nlohmann::json manifest = {{"nodes", nlohmann::json::array()},
                             {"ranks_per_node", a.copies * src[0].local_world},
                             {"world_size", a.nodes * a.copies * src[0].local_world}};
  for (int k = 0; k < a.nodes; ++k)
    if (auto e = write_node(a, src[k % 2], k, manifest); !e.empty()) {
      std::fprintf(stderr, "capfleet: node %d: %s\n", k, e.c_str());
      return 1;
    }
  std::ofstream(a.out_dir + "/fleet.json") << manifest.dump(1) << "\n";
  uint64_t records = 0;
  for (const auto& n : manifest["nodes"]) records += n["records"].get<uint64_t>();
  std::printf("{\"out_dir\": \"%s\", \"nodes\": %d, \"ranks\": %d, \"records\": %llu}\n", a.out_dir.c_str(), a.nodes,
              manifest["world_size"].get<int>(), static_cast<unsigned long long>(records));
  return 0;
}
