// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sim/loader.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "sim/cpu_work.h"
#include "sim/dataset.h"

namespace trainsim {

namespace {

struct Request {
	uint64_t index;
	uint32_t slot;
	uint32_t pad_;
};

struct Ready {
	uint64_t index;
	uint32_t slot;
	int32_t status; // 0 ok, else errno of the failed read
	uint64_t checksum;
	int64_t decode_ns;  // thread CPU in ts_preprocess_decode for this batch
	int64_t augment_ns; // and in ts_preprocess_augment
};
static_assert(sizeof(Ready) <= PIPE_BUF, "pipe writes of a message must be atomic");

bool read_full(int fd, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = read(fd, static_cast<char *>(buf) + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += static_cast<size_t>(n);
	}
	return true;
}

bool write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, static_cast<const char *>(buf) + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += static_cast<size_t>(n);
	}
	return true;
}

// Reads one sample with the page cache bypassed, as a storage-bound loader
// would see it. Returns 0 or errno.
// With page_cache (memory pressure), an ordinary buffered read.
int read_sample(const std::string &path, char *dst, uint64_t bytes, bool page_cache)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (page_cache ? 0 : O_DIRECT));
	if (fd < 0)
		return errno;
	uint64_t done = 0;
	int rc = 0;
	while (done < bytes) {
		ssize_t n = pread(fd, dst + done, bytes - done, static_cast<off_t>(done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? errno : EIO;
			break;
		}
		done += static_cast<uint64_t>(n);
	}
	close(fd);
	return rc;
}

void worker_loop(const LoaderConfig &cfg, int req_rd, int data_wr, char *slab, uint64_t batch_bytes)
{
	Request req;
	while (read_full(req_rd, &req, sizeof(req))) {
		char *buf = slab + static_cast<size_t>(req.slot) * batch_bytes;
		Ready r{req.index, req.slot, 0, 0, 0, 0};
		for (int j = 0; j < cfg.batch_samples && r.status == 0; j++) {
			// Different ranks read different samples, like a DistributedSampler.
			uint64_t s = (req.index * static_cast<uint64_t>(cfg.batch_samples) + static_cast<uint64_t>(j) +
				      static_cast<uint64_t>(cfg.rank) * 7919u) %
				     static_cast<uint64_t>(cfg.dataset_samples);
			r.status = read_sample(sample_path(cfg.data_dir, static_cast<int>(s)),
					       buf + static_cast<uint64_t>(j) * cfg.sample_bytes, cfg.sample_bytes, cfg.page_cache);
		}
		double ms = req.index >= cfg.change_at_batch ? cfg.preprocess_ms_after : cfg.preprocess_ms;
		if (r.status == 0) {
			NamedCpu spent;
			r.checksum = preprocess_work(static_cast<int64_t>(ms * 1e6), buf, batch_bytes, &spent);
			r.decode_ns = spent.ns[2];
			r.augment_ns = spent.ns[3];
		}
		if (!write_full(data_wr, &r, sizeof(r)))
			return;
	}
}

} // namespace

LoaderPool::~LoaderPool()
{
	stop();
}

bool LoaderPool::start(const LoaderConfig &cfg, std::string *err)
{
	cfg_ = cfg;
	batch_bytes_ = cfg.sample_bytes * static_cast<uint64_t>(cfg.batch_samples);
	slab_bytes_ = static_cast<size_t>(batch_bytes_) * static_cast<size_t>(cfg.prefetch);
	for (int w = 0; w < cfg.workers; w++) {
		auto wk = std::make_unique<Worker>();
		int req[2], data[2];
		if (pipe2(req, O_CLOEXEC) != 0 || pipe2(data, O_CLOEXEC) != 0) {
			*err = std::string("pipe: ") + strerror(errno);
			return false;
		}
		// Shared anonymous memory: the batch bytes never go through the pipe,
		// as PyTorch passes tensors through shared memory.
		void *slab = mmap(nullptr, slab_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (slab == MAP_FAILED) {
			*err = std::string("mmap loader slab: ") + strerror(errno);
			return false;
		}
		wk->slab = static_cast<char *>(slab);
		wk->req_wr = req[1];
		wk->data_rd = data[0];
		if (cfg.mode == LoaderMode::kProcess) {
			pid_t pid = fork();
			if (pid < 0) {
				*err = std::string("fork loader: ") + strerror(errno);
				return false;
			}
			if (pid == 0) {
				prctl(PR_SET_NAME, "trainsim-load");
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				std::string jerr;
				if (cfg.mem && !steals::join_loader_mem(*cfg.mem, w, &jerr)) {
					fprintf(stderr, "trainsim: loader %d: %s\n", w, jerr.c_str());
					_exit(3);
				}
				close(req[1]);
				close(data[0]);
				for (auto &other : workers_) {
					close(other->req_wr);
					close(other->data_rd);
				}
				worker_loop(cfg, req[0], data[1], wk->slab, batch_bytes_);
				_exit(0);
			}
			close(req[0]);
			close(data[1]);
			wk->pid = pid;
			wk->tid = pid;
		} else {
			Worker *raw = wk.get();
			LoaderConfig c = cfg;
			uint64_t bb = batch_bytes_;
			int rd = req[0], wr = data[1];
			wk->pid = getpid();
			wk->thread = std::thread([raw, c, rd, wr, bb] {
				prctl(PR_SET_NAME, "trainsim-load");
				raw->tid = static_cast<int>(syscall(SYS_gettid));
				worker_loop(c, rd, wr, raw->slab, bb);
				close(rd);
				close(wr);
			});
		}
		workers_.push_back(std::move(wk));
	}
	for (auto &wk : workers_) {
		while (wk->tid.load() == 0)
			usleep(100);
		pids_.push_back(wk->pid);
		tids_.push_back(wk->tid.load());
	}
	// Prime the queue: each worker gets `prefetch` batches ahead.
	int W = cfg.workers;
	for (int i = 0; i < cfg.prefetch; i++)
		for (int w = 0; w < W; w++) {
			Request r{static_cast<uint64_t>(w + W * i), static_cast<uint32_t>(i), 0};
			if (!write_full(workers_[w]->req_wr, &r, sizeof(r))) {
				*err = "loader request pipe closed";
				return false;
			}
		}
	started_ = true;
	return true;
}

bool LoaderPool::next(uint64_t index, Batch *out, std::string *err)
{
	Worker &wk = *workers_[index % workers_.size()];
	Ready r;
	if (!read_full(wk.data_rd, &r, sizeof(r))) {
		*err = "data loader worker exited";
		return false;
	}
	if (r.status != 0) {
		*err = std::string("data loader read failed: ") + strerror(r.status);
		return false;
	}
	if (r.index != index) {
		*err = "data loader out of order: wanted batch " + std::to_string(index) + ", got " +
		       std::to_string(r.index);
		return false;
	}
	wk.last_slot = r.slot;
	out->index = index;
	out->data = wk.slab + static_cast<size_t>(r.slot) * batch_bytes_;
	out->bytes = batch_bytes_;
	out->checksum = r.checksum;
	spent_.ns[2] += r.decode_ns;
	spent_.ns[3] += r.augment_ns;
	return true;
}

void LoaderPool::release(uint64_t index)
{
	size_t W = workers_.size();
	Worker &wk = *workers_[index % W];
	Request r{index + W * static_cast<uint64_t>(cfg_.prefetch), wk.last_slot, 0};
	write_full(wk.req_wr, &r, sizeof(r));
}

void LoaderPool::stop()
{
	if (!started_ && workers_.empty())
		return;
	// Closing the request pipe ends a worker after its current batch;
	// processes get SIGKILL so a 60 ms preprocess does not delay shutdown.
	for (auto &wk : workers_) {
		if (wk->req_wr >= 0)
			close(wk->req_wr);
		wk->req_wr = -1;
		if (wk->pid > 0 && cfg_.mode == LoaderMode::kProcess)
			kill(wk->pid, SIGKILL);
	}
	for (auto &wk : workers_) {
		if (cfg_.mode == LoaderMode::kProcess && wk->pid > 0)
			waitpid(wk->pid, nullptr, 0);
		if (wk->thread.joinable()) {
			// A thread may be blocked writing a "ready" message: drain.
			close(wk->data_rd);
			wk->data_rd = -1;
			wk->thread.join();
		}
		if (wk->data_rd >= 0)
			close(wk->data_rd);
		if (wk->slab)
			munmap(wk->slab, slab_bytes_);
	}
	workers_.clear();
	started_ = false;
}

} // namespace trainsim
