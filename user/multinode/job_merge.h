// SPDX-License-Identifier: Apache-2.0
// One job across hosts: `steptrace report A.cap B.cap ...`. Each capture is
// analysed on its own first (the same pipeline as a one-host report); the
// merge then puts every host's ranks on one time line (host_alignment.h),
// pairs the steps that one collective ends together, and names the rank
// that holds the others back: the one that arrives last at the collective
// (and so waits least in it), with its own cause, and the wait it costs the
// others. The local analyses cannot: each host sees only its own ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attribution/categories.h"
#include "attribution/job_analysis.h"
#include "multinode/host_alignment.h"
#include "pipeline/analysis.h"

namespace steptrace {

struct JobInput {
  std::string path;
  const SessionReport* report = nullptr;
};

// A host's adapters during the collective (EFA counters): the rate the
// collective achieved on them against the link's.
struct HostLink {
  bool measured = false;
  double link_gbit = 0;      // per adapter
  double achieved_gbit = 0;  // the collective's bytes over its time
  double ratio = -1;         // achieved / link
  double mib_per_step = 0;   // per rank's adapter
  bool network_bound = false;
  std::string why_not;       // "" when measured
};

struct JobHost {
  std::string path, hostname, boot_id, job_id;
  HostAlignment clock;
  std::string network_why_not;  // why the bytes it exchanged did not refine its clock ("" when they did or need not)
  std::string local_headline;  // what this host's report alone says
  Category local_category = Category::other;
  HostLink link;
  size_t ranks = 0;
  bool incomplete = false;
};

struct JobRank {
  size_t host = 0;        // index in JobReport::hosts
  int node = -1;          // GROUP_RANK / NODE_RANK / SLURM_NODEID; else the host's index
  int global_rank = -1;   // RANK / SLURM_PROCID / OMPI_COMM_WORLD_RANK; else numbered after the known ones
  int local_rank = -1;
  bool rank_from_launcher = false;  // global_rank came from the launcher's variables
  uint32_t pid = 0;
  const RankResult* res = nullptr;
  // Over the job steps every rank took part in:
  uint64_t matched_steps = 0;
  uint64_t last_steps = 0;      // steps it arrived last at the collective, and held the others back
  uint64_t late_ns_sum = 0;     // its lateness in those steps
  uint64_t step_ns_sum = 0;
  CategoryNs ns{};              // its time per category
};

struct JobCulprit {
  bool found = false;
  size_t rank = 0;              // index in JobReport::ranks
  uint64_t last_steps = 0;
  uint64_t mean_late_ns = 0;
  Category cause = Category::other;
  std::string cause_detail;     // "CPU preprocessing", "storage", ... ("" when none)
  uint64_t cause_excess_ns = 0; // per step, its cause over the other ranks' mean
  uint64_t victim_wait_ns = 0;  // per step, the other ranks' mean collective wait in the steps it held back
  std::vector<size_t> victims;  // indexes in JobReport::ranks
};

struct NodeSummary {
  int node = 0;
  std::vector<size_t> hosts;
  std::vector<size_t> ranks;
  uint64_t mean_step_ns = 0;
  uint64_t mean_collective_ns = 0;  // per rank and step
  uint64_t last_steps = 0;          // steps one of its ranks held the others back
};

struct JobReport {
  std::string job_id;                 // the captures' job id ("" when none said)
  int world_size = -1;                // from WORLD_SIZE, when the ranks say
  std::vector<JobHost> hosts;
  std::vector<JobRank> ranks;         // by global rank
  std::vector<NodeSummary> nodes;     // by node
  uint64_t job_steps = 0;             // steps every rank was paired in
  uint64_t pairing_tolerance_ns = 0;
  // The largest error the alignment may have between two hosts: with every
  // host fitted by the network, the two largest network bounds; otherwise
  // the anchors' reading bounds, and the wall clocks' disagreement between
  // hosts not on the same boot comes on top, not measured.
  uint64_t alignment_bound_ns = 0;
  size_t wall_clock_hosts = 0;        // hosts on their own clock (not the same boot as another)
  bool network_aligned = false;       // every such host but the first fitted by the bytes exchanged
  uint64_t reading_bound_ns = 0;      // the anchors' reading bounds alone (two hosts' added)
  // By the wall clocks alone: the reading bound plus the two largest errors
  // the hosts' kernels stated for their wall clocks; -1 when a host did not
  // state one or was not synchronized (unbounded).
  int64_t wall_clock_bound_ns = -1;
  std::vector<size_t> unsynced_hosts;  // hosts whose wall clock was not synchronized
  JobCulprit culprit;
  Category common_category = Category::other;  // what the ranks' time mostly went to
  std::string headline;
  std::vector<std::string> evidence;
  std::vector<std::string> warnings;
};

JobReport merge_job(const std::vector<JobInput>& inputs);

// "0-2,5" for ranks {0,1,2,5}.
std::string rank_ranges(std::vector<int> ranks);

}  // namespace steptrace
