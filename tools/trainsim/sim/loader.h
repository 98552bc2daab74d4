// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// loader.h - a PyTorch-DataLoader-like worker pool. Batch k is made by
// worker k % W into a shared-memory slot; the worker announces it with a
// small message on its own pipe, and the main thread blocks in read() on
// that pipe (the wakeup a tracer follows from loader to main thread).
// The main thread hands a slot back by sending the next batch index on the
// worker's request pipe, so at most `prefetch` batches per worker exist:
// the bounded queue.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sim/cpu_work.h"
#include "sim/knobs.h"
#include "sim/steals.h"

namespace trainsim {

struct LoaderConfig {
	std::string data_dir;
	int rank = 0;
	int workers = 1;
	LoaderMode mode = LoaderMode::kProcess;
	int prefetch = 2;
	int batch_samples = 1;
	uint64_t sample_bytes = 4096;
	int dataset_samples = 1;
	double preprocess_ms = 0;
	// Batches with index >= change_at_batch take preprocess_ms_after
	// (trainsim --change preprocess-ms=...; batch k feeds step k).
	uint64_t change_at_batch = UINT64_MAX;
	double preprocess_ms_after = 0;
	// Memory pressure: each worker process joins these cgroups (the limited
	// one and its own PSI group) and reads through the page cache.
	std::optional<steals::LoaderMem> mem;
	bool page_cache = false;
};

struct Batch {
	uint64_t index = 0;
	const char *data = nullptr;
	uint64_t bytes = 0;
	uint64_t checksum = 0;
};

class LoaderPool {
public:
	LoaderPool() = default;
	~LoaderPool();
	LoaderPool(const LoaderPool &) = delete;
	LoaderPool &operator=(const LoaderPool &) = delete;

	bool start(const LoaderConfig &cfg, std::string *err);
	// Blocks until batch `index` is ready. Batches must be taken in order.
	bool next(uint64_t index, Batch *out, std::string *err);
	// Returns batch `index`'s slot to its worker for a later batch.
	void release(uint64_t index);
	void stop();

	const std::vector<int> &pids() const { return pids_; }
	const std::vector<int> &tids() const { return tids_; }
	uint64_t batch_bytes() const { return batch_bytes_; }
	// Preprocessing CPU by named function over the batches taken so far.
	const NamedCpu &preprocess_cpu() const { return spent_; }

private:
	struct Worker {
		int req_wr = -1;  // main -> worker: batch requests
		int data_rd = -1; // worker -> main: "batch ready"
		char *slab = nullptr;
		pid_t pid = 0;
		std::thread thread;
		std::atomic<int> tid{0};
		uint32_t last_slot = 0;
	};
	LoaderConfig cfg_;
	uint64_t batch_bytes_ = 0;
	NamedCpu spent_; // preprocessing CPU by named function, from the workers' messages
	size_t slab_bytes_ = 0;
	std::vector<std::unique_ptr<Worker>> workers_;
	std::vector<int> pids_, tids_;
	bool started_ = false;
};

} // namespace trainsim
