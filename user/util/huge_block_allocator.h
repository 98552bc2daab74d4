// SPDX-License-Identifier: Apache-2.0
// An allocator for the timeline's long vectors (a record or two per entry):
// a block of kHugeBlockFrom bytes or more is mapped on its own, 2 MiB-aligned,
// and advised for transparent huge pages; smaller ones come from operator new.
//
// Why: a busy session's vectors grow by doubling to tens of MiB, and every
// new block is first touched page by page. On the 2-vCPU VM a 1 M-record
// ioctl storm spent more CPU in those page faults than in decoding (a replay:
// 35.6 k faults, 0.79 s; with huge-page advice 4 k faults, 0.32-0.51 s).
// Hosts where THP is "never" get plain 4 KiB pages from the same mapping;
// "madvise" (Ubuntu's default) and "always" get 2 MiB ones. The cost is at
// most one partly used 2 MiB page per vector of 4 MiB or more.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>

namespace steptrace {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugeBlockFrom = size_t{4} << 20;

namespace detail {

inline size_t huge_block_length(size_t bytes) { return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }

// A private anonymous mapping of `bytes` (rounded up to 2 MiB), 2 MiB-aligned
// so that every page of it can be a huge page.
inline void* map_huge_block(size_t bytes) {
  const size_t len = huge_block_length(bytes);
  // Over-map by one huge page and trim, for the alignment.
  void* raw = ::mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (const size_t head = aligned - start) ::munmap(raw, head);
  if (const size_t tail = kHugePageBytes - (aligned - start)) ::munmap(reinterpret_cast<void*>(aligned + len), tail);
  // Advice only: where THP is off this fails or does nothing, and the block
  // is an ordinary mapping.
  (void)::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

inline void unmap_huge_block(void* p, size_t bytes) { ::munmap(p, huge_block_length(bytes)); }

}  // namespace detail

template <typename T>
struct HugeBlockAllocator {
  using value_type = T;

  HugeBlockAllocator() noexcept = default;
  template <typename U>
  HugeBlockAllocator(const HugeBlockAllocator<U>&) noexcept {}

  // Plain operator new for the small blocks (a program that replaces it, as
  // tools/bench/merge_scale does to count its heap, sees them).
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned entries need aligned new");

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugeBlockFrom) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(detail::map_huge_block(bytes));
  }

  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugeBlockFrom)
      ::operator delete(p);
    else
      detail::unmap_huge_block(p, bytes);
  }

  template <typename U>
  bool operator==(const HugeBlockAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace steptrace
