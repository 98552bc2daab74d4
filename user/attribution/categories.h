// SPDX-License-Identifier: Apache-2.0
// Where a step's wall time can go. Names are shared with trainsim's ground
// truth, the JSON schema and the Prometheus labels: never rename.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace steptrace {

enum class Category : uint8_t {
  device_execute = 0,  // accelerator busy (inside nrt_execute / between kick and completion)
  data_loading,        // main thread waiting for batches from loader workers
  dma_submission,      // host<->device copies, descriptor writes, queue kicks
  collective,          // network waits, waiting for other ranks
  host_overhead,       // main thread on CPU outside all of the above
  cpu_contention,      // runnable but not running (preempted / waiting for a CPU)
  other,
  count_
};

inline constexpr size_t kCategories = static_cast<size_t>(Category::count_);

inline constexpr std::array<std::string_view, kCategories> kCategoryNames = {
    "device_execute", "data_loading", "dma_submission", "collective", "host_overhead", "cpu_contention", "other"};

inline std::string_view category_name(Category c) { return kCategoryNames[static_cast<size_t>(c)]; }

using CategoryNs = std::array<uint64_t, kCategories>;

}  // namespace steptrace
