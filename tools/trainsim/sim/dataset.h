// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// dataset.h - the sample files the loaders read with O_DIRECT.
#pragma once

#include <cstdint>
#include <string>

namespace trainsim {

// A directory for temporary data on a real disk: /tmp unless it is tmpfs
// (O_DIRECT reads from tmpfs would never touch a disk), else /var/tmp.
std::string real_disk_tmp_base();

std::string sample_path(const std::string &dir, int index);

// Creates (or reuses, when the size already matches) `samples` files of
// `sample_bytes` random bytes, flushed to disk, and checks that O_DIRECT
// reads work there. Returns false with a message on failure.
bool prepare_dataset(const std::string &dir, int samples, uint64_t sample_bytes, std::string *err);

} // namespace trainsim
