// SPDX-License-Identifier: Apache-2.0
// A vector of trivially copyable entries for the timeline's long histories
// (a record or two per entry) that grows a large block without copying it.
//
// Why: a busy session's vectors double to tens of MiB. std::vector copies
// every doubling into a fresh block the kernel must first zero: in the first
// window of a 10 ms trainsim run (805 k records) that copy and its page
// faults were ~20 % of steptrace's CPU (perf, 2026-12-07). Here a block of
// kHugeBlockFrom bytes or more is its own 2 MiB-aligned mapping, advised for
// transparent huge pages, and growing it maps a larger aligned region and
// moves the old pages to its start with mremap (page tables move; no byte is
// copied or zeroed again). Smaller blocks come from operator new and grow
// by copying, as std::vector's do. Hosts where THP is "never" get 4 KiB
// pages from the same mappings.
//
// Only what the timeline uses of std::vector's interface is here;
// iterators are pointers.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>

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

// A huge block of old_bytes grown to new_bytes: a new aligned region, the old
// pages moved onto its start. The old block is gone afterwards (also when the
// move fails and the bytes are copied instead).
inline void* grow_huge_block(void* old, size_t old_bytes, size_t new_bytes) {
  void* fresh = map_huge_block(new_bytes);
  const size_t old_len = huge_block_length(old_bytes);
  if (::mremap(old, old_len, old_len, MREMAP_MAYMOVE | MREMAP_FIXED, fresh) == MAP_FAILED) {
    std::memcpy(fresh, old, old_bytes);  // cannot happen short of a kernel without MREMAP_FIXED
    ::munmap(old, old_len);
  }
  return fresh;
}

}  // namespace detail

template <typename T>
class GrowVector {
  static_assert(std::is_trivially_copyable_v<T>, "entries are moved as bytes");
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned entries need aligned new");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  GrowVector() noexcept = default;
  explicit GrowVector(size_t n) { resize(n); }
  GrowVector(std::initializer_list<T> init) { insert(end(), init.begin(), init.end()); }
  GrowVector(const GrowVector& o) { insert(end(), o.begin(), o.end()); }
  GrowVector(GrowVector&& o) noexcept { swap(o); }
  GrowVector& operator=(const GrowVector& o) {
    if (this != &o) {
      clear();
      insert(end(), o.begin(), o.end());
    }
    return *this;
  }
  GrowVector& operator=(GrowVector&& o) noexcept {
    GrowVector(std::move(o)).swap(*this);
    return *this;
  }
  ~GrowVector() { release(data_, cap_); }

  void swap(GrowVector& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return cap_; }
  bool empty() const noexcept { return size_ == 0; }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  void push_back(const T& v) {
    if (size_ == cap_) {
      const T copy = v;  // v may live in this vector
      grow_to(next_capacity(size_ + 1));
      ::new (static_cast<void*>(data_ + size_)) T(copy);
    } else {
      ::new (static_cast<void*>(data_ + size_)) T(v);
    }
    ++size_;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    T v(std::forward<Args>(args)...);
    push_back(v);
    return back();
  }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }

  void reserve(size_t n) {
    if (n > cap_) grow_to(n);
  }
  void resize(size_t n) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) ::new (static_cast<void*>(data_ + i)) T();
    size_ = n;
  }
  void shrink_to_fit() {
    if (cap_ == size_) return;
    GrowVector kept;
    kept.reserve(size_);
    kept.insert(kept.end(), begin(), end());
    swap(kept);
  }

  iterator erase(const_iterator first, const_iterator last) {
    T* f = const_cast<T*>(first);
    const size_t n = static_cast<size_t>(last - first);
    if (n) {
      std::memmove(static_cast<void*>(f), static_cast<const void*>(last),
                   static_cast<size_t>(end() - last) * sizeof(T));
      size_ -= n;
    }
    return f;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }

  template <typename It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = static_cast<size_t>(pos - data_);
    const size_t n = static_cast<size_t>(std::distance(first, last));
    if (n == 0) return data_ + at;
    bool inside = false;  // the source is in this vector: the move below would shift it
    if constexpr (std::is_pointer_v<It>)
      inside = data_ && static_cast<const T*>(&*first) >= data_ && static_cast<const T*>(&*first) < data_ + size_;
    if (size_ + n > cap_ || inside) {
      // Copied out first, then placed.
      GrowVector src;
      src.grow_to(n);
      for (size_t i = 0; first != last; ++first, ++i) ::new (static_cast<void*>(src.data_ + i)) T(*first);
      src.size_ = n;
      if (size_ + n > cap_) grow_to(next_capacity(size_ + n));
      return insert(data_ + at, src.begin(), src.end());
    }
    if (data_ && at < size_)
      std::memmove(static_cast<void*>(data_ + at + n), static_cast<const void*>(data_ + at), (size_ - at) * sizeof(T));
    for (size_t i = 0; first != last; ++first, ++i) ::new (static_cast<void*>(data_ + at + i)) T(*first);
    size_ += n;
    return data_ + at;
  }

 private:
  size_t next_capacity(size_t need) const { return std::max<size_t>({need, cap_ * 2, 8}); }

  static bool huge(size_t n) { return n * sizeof(T) >= kHugeBlockFrom; }

  static void release(T* p, size_t cap) noexcept {
    if (!p) return;
    if (huge(cap))
      detail::unmap_huge_block(p, cap * sizeof(T));
    else
      ::operator delete(p);
  }

  // Room for n entries (n > cap_), the entries kept.
  void grow_to(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    T* fresh = nullptr;
    if (huge(cap_)) {
      // A huge block grows by moving its pages (the byte count rounds up
      // to 2 MiB: room that is mapped is room to use).
      fresh = static_cast<T*>(detail::grow_huge_block(data_, cap_ * sizeof(T), bytes));
      data_ = fresh;
      cap_ = detail::huge_block_length(bytes) / sizeof(T);
      return;
    }
    if (huge(n)) {
      fresh = static_cast<T*>(detail::map_huge_block(bytes));
      n = detail::huge_block_length(bytes) / sizeof(T);
    } else {
      fresh = static_cast<T*>(::operator new(bytes));
    }
    if (size_) std::memcpy(static_cast<void*>(fresh), static_cast<const void*>(data_), size_ * sizeof(T));
    release(data_, cap_);
    data_ = fresh;
    cap_ = n;
  }

  T* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
};

}  // namespace steptrace
