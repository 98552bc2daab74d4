// SPDX-License-Identifier: Apache-2.0
#include "multinode/stream_match.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace steptrace {
namespace {

// One bound on the correction c(t) at the host's anchored job time t:
// c(t) >= value (lower) or c(t) <= value (upper).
struct Bound {
  int64_t t = 0;
  int64_t value = 0;
};

// A call's bytes as positions in an unwrapped stream: [pos - bytes, pos).
struct Placed {
  int64_t pos = 0;
  uint32_t bytes = 0;
  int64_t start = 0, end = 0;  // job times
};

constexpr int64_t kWrap = int64_t{1} << 32;

// The marks of one side of one flow, in time order, their sequence numbers
// unwrapped (a step back of more than half the space is a wrap).
std::vector<Placed> place(const std::vector<const StreamMark*>& ms, const HostAlignment& clk, bool full) {
  std::vector<Placed> out;
  out.reserve(ms.size());
  int64_t epoch = 0;
  uint32_t last = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    const StreamMark& m = *ms[i];
    if (i > 0) {
      const int32_t moved = static_cast<int32_t>(m.seq_end - last);
      if (moved < 0 && m.seq_end > last) epoch -= kWrap;  // back across a wrap (reordered threads)
      if (moved > 0 && m.seq_end < last) epoch += kWrap;
    }
    last = m.seq_end;
    Placed p;
    p.pos = epoch + m.seq_end;
    p.bytes = m.bytes;
    p.start = full ? clk.to_job_ns(m.start) : clk.anchored_job_ns(m.start);
    p.end = full ? clk.to_job_ns(m.end) : clk.anchored_job_ns(m.end);
    out.push_back(p);
  }
  return out;
}

// Moves the receiver's positions by whole wraps onto the sender's: the two
// hosts saw the first byte of their recordings at different points of the
// stream. The calls nearest in time name nearby bytes.
void same_epoch(const std::vector<Placed>& sends, std::vector<Placed>& recvs) {
  if (sends.empty() || recvs.empty()) return;
  const Placed& r = recvs.front();
  auto near = std::min_element(sends.begin(), sends.end(), [&r](const Placed& a, const Placed& b) {
    return std::llabs(a.end - r.end) < std::llabs(b.end - r.end);
  });
  const int64_t k = static_cast<int64_t>(std::llround(static_cast<double>(near->pos - r.pos) / static_cast<double>(kWrap)));
  for (auto& p : recvs) p.pos += k * kWrap;
}

// For each receive, the latest-starting send that shares a byte with it:
// (send start, receive end), the tightest pair that receive gives.
template <typename F>
void overlapping_pairs(std::vector<Placed> sends, std::vector<Placed> recvs, F&& emit) {
  same_epoch(sends, recvs);
  auto by_pos = [](const Placed& a, const Placed& b) { return a.pos < b.pos; };
  std::sort(sends.begin(), sends.end(), by_pos);
  std::sort(recvs.begin(), recvs.end(), by_pos);
  size_t i = 0;
  for (const auto& r : recvs) {
    const int64_t r_lo = r.pos - r.bytes;
    while (i < sends.size() && sends[i].pos <= r_lo) ++i;  // ends at or before the receive's first byte
    int64_t latest = std::numeric_limits<int64_t>::min();
    for (size_t k = i; k < sends.size() && sends[k].pos - sends[k].bytes < r.pos; ++k)
      latest = std::max(latest, sends[k].start);
    if (latest != std::numeric_limits<int64_t>::min()) emit(latest, r.end);
  }
}

using FlowMap = std::unordered_map<uint64_t, std::vector<const StreamMark*>>;

FlowMap flows_of(const std::vector<StreamMark>& marks, bool send) {
  FlowMap out;
  for (const auto& m : marks)
    if (m.send == send) out[m.flow].push_back(&m);
  for (auto& [f, v] : out)
    std::stable_sort(v.begin(), v.end(), [](const StreamMark* a, const StreamMark* b) { return a->end < b->end; });
  return out;
}

// The band c(t) = a + b (t - t0) may run in: its width at slope b.
struct Band {
  double width = 0, middle = 0;
};
Band band_at(double b, const std::vector<Bound>& lower, const std::vector<Bound>& upper, int64_t t0) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  for (const auto& l : lower) lo = std::max(lo, static_cast<double>(l.value) - b * static_cast<double>(l.t - t0));
  for (const auto& u : upper) hi = std::min(hi, static_cast<double>(u.value) - b * static_cast<double>(u.t - t0));
  return {hi - lo, (hi + lo) / 2};
}

// The kernel slews a clock by at most 500 ppm; two hosts' wall clocks,
// already lined up by their anchors, differ in rate by at most twice that.
constexpr double kMaxResidualSlope = 1000e-6;

// The line through the middle of the band the bounds leave, and how far
// from it the truth can be.
void solve_band(const std::vector<Bound>& lower, const std::vector<Bound>& upper, StreamFit& fit) {
  int64_t t_min = std::numeric_limits<int64_t>::max(), t_max = std::numeric_limits<int64_t>::min();
  for (const auto* v : {&lower, &upper})
    for (const auto& b : *v) {
      t_min = std::min(t_min, b.t);
      t_max = std::max(t_max, b.t);
    }
  const int64_t t0 = t_min + (t_max - t_min) / 2;
  // The width is concave in the slope (a minimum of lines less a maximum of
  // lines): a ternary search finds its widest point.
  double a = -kMaxResidualSlope, b = kMaxResidualSlope;
  for (int i = 0; i < 60; ++i) {
    const double m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
    if (band_at(m1, lower, upper, t0).width < band_at(m2, lower, upper, t0).width) a = m1;
    else b = m2;
  }
  const double widest = (a + b) / 2;
  if (band_at(widest, lower, upper, t0).width < 0) {
    fit.why_not = fmt::format("the exchanges contradict each other by {:.0f} ns at best (a clock stepped, or bytes "
                              "were matched wrongly)", -band_at(widest, lower, upper, t0).width);
    return;
  }
  // The slope: the middle of every slope the bounds allow, not the widest
  // point, which noise in the quickest exchanges tilts (over a short
  // recording a tilt of a few ppm is within the band). Bisect each edge.
  auto edge = [&](double inside, double outside) {
    if (band_at(outside, lower, upper, t0).width >= 0) return outside;
    for (int i = 0; i < 60; ++i) {
      const double mid = (inside + outside) / 2;
      (band_at(mid, lower, upper, t0).width >= 0 ? inside : outside) = mid;
    }
    return inside;
  };
  const double left = edge(widest, -kMaxResidualSlope), right = edge(widest, kMaxResidualSlope);
  const double slope = (left + right) / 2;
  const Band band = band_at(slope, lower, upper, t0);
  if (band.width < 0) {
    fit.why_not = fmt::format("the exchanges contradict each other by {:.0f} ns at best (a clock stepped, or bytes "
                              "were matched wrongly)", -band.width);
    return;
  }
  fit.ok = true;
  fit.origin_ns = t0;
  fit.offset_ns = static_cast<int64_t>(std::llround(band.middle));
  fit.drift_ppm = slope * 1e6;
  // The bound: how far any line the exchanges allow strays from the fitted
  // one over their span. At time x the allowed corrections run from
  // min over allowed slopes b of (band bottom at b) + b x to max of (band
  // top) + b x - the top is concave in b, the bottom convex, so a ternary
  // search finds each - and the distance from the fitted line, convex in x,
  // is largest at the span's ends.
  auto farthest = [&](double x, bool top) {
    auto value = [&](double b) {
      const Band at = band_at(b, lower, upper, t0);
      return top ? at.middle + at.width / 2 + b * x : -(at.middle - at.width / 2 + b * x);
    };
    double lo = left, hi = right;
    for (int i = 0; i < 60; ++i) {
      const double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
      if (value(m1) < value(m2)) lo = m1;
      else hi = m2;
    }
    return value((lo + hi) / 2);
  };
  double bound = band.width / 2;
  for (const int64_t end : {t_min, t_max}) {
    const double x = static_cast<double>(end - t0), fitted = band.middle + slope * x;
    bound = std::max({bound, farthest(x, true) - fitted, fitted + farthest(x, false)});
  }
  fit.bound_ns = static_cast<uint64_t>(std::ceil(bound));
}

struct HostFlows {
  FlowMap sends, recvs;
};

StreamFit fit_flows(const HostFlows& host, const HostAlignment& host_clock, const HostFlows& peer,
                    const HostAlignment& peer_clock) {
  StreamFit fit;
  std::vector<Bound> lower, upper;
  // Peer -> host: the host's receive ended after the peer's send started.
  for (const auto& [flow, recvs] : host.recvs) {
    auto s = peer.sends.find(flow);
    if (s == peer.sends.end()) continue;
    ++fit.flows;
    overlapping_pairs(place(s->second, peer_clock, true), place(recvs, host_clock, false),
                      [&lower](int64_t send_start, int64_t recv_end) {
                        lower.push_back({recv_end, send_start - recv_end});
                      });
  }
  // Host -> peer: the host's send started before the peer's receive ended.
  for (const auto& [flow, sends] : host.sends) {
    auto r = peer.recvs.find(flow);
    if (r == peer.recvs.end()) continue;
    ++fit.flows;
    overlapping_pairs(place(sends, host_clock, false), place(r->second, peer_clock, true),
                      [&upper](int64_t send_start, int64_t recv_end) {
                        upper.push_back({send_start, recv_end - send_start});
                      });
  }
  fit.lower = lower.size();
  fit.upper = upper.size();
  if (lower.empty() || upper.empty()) {
    fit.why_not = fit.flows == 0 ? "no byte stream seen on both hosts"
                                 : fmt::format("bytes went one way only ({} exchanges to it, {} from it)", fit.lower,
                                               fit.upper);
    return fit;
  }
  solve_band(lower, upper, fit);
  return fit;
}

}  // namespace

StreamFit fit_stream_offset(const std::vector<StreamMark>& host, const HostAlignment& host_clock,
                            const std::vector<StreamMark>& peer, const HostAlignment& peer_clock) {
  return fit_flows({flows_of(host, true), flows_of(host, false)}, host_clock,
                   {flows_of(peer, true), flows_of(peer, false)}, peer_clock);
}

void refine_by_streams(std::vector<HostAlignment>& clocks, const std::vector<const StreamMarks*>& marks,
                       std::vector<std::string>& why_not) {
  const size_t n = clocks.size();
  why_not.assign(n, "");
  auto own_clock = [&clocks](size_t h) {
    return clocks[h].method == AlignmentMethod::anchors || clocks[h].method == AlignmentMethod::start_offset;
  };
  std::vector<HostFlows> flows(n);
  for (size_t h = 0; h < n; ++h)
    if (marks[h]) flows[h] = {flows_of(marks[h]->marks(), true), flows_of(marks[h]->marks(), false)};
  std::vector<bool> aligned(n, false);
  // Each unaligned host's tightest fit to an aligned one so far. A fit to
  // host p is made once, when p is aligned (its clock is final then).
  std::vector<StreamFit> best(n);
  std::vector<size_t> best_peer(n, n);
  auto fit_against = [&](size_t p) {
    for (size_t h = 0; h < n; ++h) {
      if (aligned[h] || !own_clock(h)) continue;
      if (!marks[h] || marks[h]->marks().empty()) {
        why_not[h] = marks[h] && marks[h]->without_position()
                         ? "its capture holds no TCP stream positions (recorded before ABI 7)"
                         : "its capture holds no TCP stream positions (no TCP calls traced)";
        continue;
      }
      StreamFit f = fit_flows(flows[h], clocks[h], flows[p], clocks[p]);
      if (!f.ok) {
        if (why_not[h].empty()) why_not[h] = fmt::format("against host {}: {}", p, f.why_not);
        continue;
      }
      f.bound_ns += clocks[p].net_bound_ns;
      if (best_peer[h] == n || f.bound_ns < best[h].bound_ns) {
        best[h] = f;
        best_peer[h] = p;
      }
    }
  };
  // An aligned host's marks, and those of the hosts of its boot (its clock
  // exactly), bound the others.
  auto join = [&](size_t k) {
    aligned[k] = true;
    fit_against(k);
    for (size_t s = 0; s < n; ++s) {
      if (clocks[s].method != AlignmentMethod::same_boot || clocks[s].same_boot_as != static_cast<int>(k)) continue;
      clocks[s].net_peer = clocks[k].net_peer;
      clocks[s].net_offset_ns = clocks[k].net_offset_ns;
      clocks[s].net_origin_ns = clocks[k].net_origin_ns;
      clocks[s].net_drift_ppm = clocks[k].net_drift_ppm;
      clocks[s].net_bound_ns = clocks[k].net_bound_ns;
      aligned[s] = true;
      fit_against(s);
    }
  };
  for (size_t h = 0; h < n; ++h)
    if (own_clock(h)) {
      join(h);  // the reference: the first host on its own clock
      break;
    }
  // Then the tightest fitted host joins the aligned ones, until none is left.
  for (;;) {
    size_t pick = n;
    for (size_t h = 0; h < n; ++h)
      if (!aligned[h] && best_peer[h] != n && (pick == n || best[h].bound_ns < best[pick].bound_ns)) pick = h;
    if (pick == n) break;
    HostAlignment& c = clocks[pick];
    c.method = AlignmentMethod::network;
    c.net_peer = static_cast<int>(best_peer[pick]);
    c.net_offset_ns = best[pick].offset_ns;
    c.net_origin_ns = best[pick].origin_ns;
    c.net_drift_ppm = best[pick].drift_ppm;
    c.net_bound_ns = best[pick].bound_ns;
    c.net_lower = best[pick].lower;
    c.net_upper = best[pick].upper;
    why_not[pick].clear();
    join(pick);
  }
}

}  // namespace steptrace
