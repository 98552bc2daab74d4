// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// exec.cpp - the chips' execution engines: the NeuronLink barrier, the
// engine thread that runs each kicked execution, and the device collective
// through the runtime's network proxy.
#include <sys/prctl.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "device/engine.h"
#include "device/user_mem.h"
#include "sim/pacing.h"

namespace trainsim::device {

namespace {

constexpr int32_t kNrtInvalid = 2;
constexpr int32_t kNrtExecHwErrCollectives = 1200;

} // namespace

bool Fabric::arrive(uint64_t seq, uint64_t timeout_ms)
{
	std::unique_lock lk(mu_);
	if (shutdown_)
		return false;
	Round &r = rounds_[seq]; // std::map references survive other inserts
	if (r.failed)
		return false;
	if (++r.arrived == participants_) {
		r.done = true;
		cv_.notify_all();
	} else if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
				 [&] { return r.done || r.failed || shutdown_; })) {
		// A partner died or never came: fail everyone waiting on this round
		// instead of hanging the job forever.
		r.failed = true;
		cv_.notify_all();
	}
	bool ok = r.done;
	if (ok && ++r.left == participants_)
		rounds_.erase(seq);
	return ok;
}

void Fabric::shutdown()
{
	{
		std::lock_guard lk(mu_);
		shutdown_ = true;
		for (auto &[seq, r] : rounds_)
			r.failed = true;
	}
	cv_.notify_all();
}

bool Device::proxy_transfer(pid_t tgid, uint64_t mailbox, uint64_t seq, uint64_t bytes, uint64_t xfer_ns)
{
	trainsim_proxy_mailbox m{};
	m.bytes = bytes;
	m.xfer_ns = xfer_ns;
	if (copy_to_user(tgid, mailbox, &m, offsetof(trainsim_proxy_mailbox, req_seq)) != 0 ||
	    copy_to_user(tgid, mailbox + offsetof(trainsim_proxy_mailbox, req_seq), &seq, sizeof(seq)) != 0)
		return false;
	// The device polls host memory for the proxy's completion (DMA reads).
	uint64_t deadline = monotonic_ns() + cfg_.collective_timeout_ms * 1000000ull;
	for (;;) {
		uint64_t done = 0;
		if (copy_from_user(tgid, &done, mailbox + offsetof(trainsim_proxy_mailbox, done_seq), sizeof(done)) != 0)
			return false;
		if (done >= seq)
			return true;
		if (monotonic_ns() > deadline)
			return false;
		{
			std::lock_guard lk(mu_);
			if (stopping_)
				return false;
		}
		sleep_until(monotonic_ns() + 20000);
	}
}

void Device::post(const NotifyQueue &nq, const ExecJob &job, trainsim_nq_entry entry)
{
	uint64_t slot = nq.addr + (job.seq % nq.entries) * sizeof(trainsim_nq_entry);
	entry.seq = job.seq;
	// Two writes: payload, then seq, so the poller never sees a seq whose
	// payload is still in flight.
	if (copy_to_user(nq.tgid, slot, &entry, offsetof(trainsim_nq_entry, seq)) == 0)
		copy_to_user(nq.tgid, slot + offsetof(trainsim_nq_entry, seq), &entry.seq, sizeof(entry.seq));
}

void Device::exec_loop()
{
	char name[16];
	snprintf(name, sizeof(name), "nrt-device%d", index_);
	prctl(PR_SET_NAME, name);
	prctl(PR_SET_TIMERSLACK, 1UL); // sub-50us wakeups for a faithful compute time
	for (;;) {
		ExecJob job;
		Program prog;
		NotifyQueue nq;
		uint64_t mailbox = 0;
		{
			std::unique_lock lk(mu_);
			cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
			if (stopping_)
				return;
			job = queue_.front();
			queue_.pop_front();
			auto p = programs_.find({job.tgid, job.nc});
			if (p != programs_.end())
				prog = p->second;
			auto q = nqs_.find(job.tgid);
			if (q == nqs_.end())
				continue; // nobody to tell: the runtime never set up its NQ
			nq = q->second;
			auto px = proxies_.find(job.tgid);
			mailbox = px == proxies_.end() ? 0 : px->second;
		}
		trainsim_nq_entry e{};
		e.t_start_ns = monotonic_ns();
		if (!prog.valid) {
			e.status = kNrtInvalid;
			e.t_compute_end_ns = e.t_cc_ready_ns = e.t_done_ns = e.t_start_ns;
			post(nq, job, e);
			continue;
		}
		// The execution's own compute time (a COMPUTE descriptor), else the
		// program's.
		e.planned_compute_ns = job.compute_ns >= 0 ? static_cast<uint64_t>(job.compute_ns) : prog.neff.compute_ns;
		// The engine computes without the host: sleep, burn no host CPU.
		sleep_until(e.t_start_ns + e.planned_compute_ns);
		e.t_compute_end_ns = monotonic_ns();
		e.t_cc_ready_ns = e.t_compute_end_ns;
		e.t_done_ns = e.t_compute_end_ns;
		if (prog.neff.cc_bytes > 0 && prog.neff.cc_ranks > 1) {
			if (static_cast<int>(prog.neff.cc_ranks) != cfg_.devices) {
				e.status = kNrtInvalid;
			} else if (!fabric_.arrive(job.seq, cfg_.collective_timeout_ms)) {
				e.status = kNrtExecHwErrCollectives;
				e.t_cc_ready_ns = e.t_done_ns = monotonic_ns();
			} else {
				e.t_cc_ready_ns = monotonic_ns();
				e.planned_cc_xfer_ns =
					device_allreduce_ns(prog.neff.cc_bytes, static_cast<int>(prog.neff.cc_ranks),
							    cfg_.link_gbps);
				if (mailbox) {
					// The network part runs on the runtime's proxy thread.
					if (!proxy_transfer(job.tgid, mailbox, job.seq, prog.neff.cc_bytes,
							    e.planned_cc_xfer_ns))
						e.status = kNrtExecHwErrCollectives;
				} else {
					sleep_until(e.t_cc_ready_ns + e.planned_cc_xfer_ns);
				}
				e.t_done_ns = monotonic_ns();
			}
		}
		counters_.executions++;
		sysfs_.on_execution(static_cast<int>(job.nc), e.status);
		post(nq, job, e);
	}
}

} // namespace trainsim::device
