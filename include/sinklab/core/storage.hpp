// Reference-counted, 64-byte aligned host buffers recycled through a size-keyed pool,
// so a training loop that allocates the same shapes every step stops calling malloc
// after its first step. memory<cpu> (at the end) is the cpu device's memory (core/device.hpp)
// on top of the pool.
//
// Blocks of 1 MiB and more are whole 2 MiB pages: on Linux each is its own 2 MiB-aligned
// mapping that asks for transparent huge pages (MADV_HUGEPAGE; honoured when THP is "always"
// or "madvise"). A training step strides through hundreds of MiB of activations — rows
// kilobytes apart, transposed reads in weight gradients — and on 4 KiB pages every few rows
// needs another TLB entry: the large decoder of bench/train_step runs 3% faster on huge pages.
// The price is up to 2× the memory for blocks just over 1 MiB.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "sinklab/core/device.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/shape.hpp"
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sinklab {

// A cache of freed blocks in front of a device's allocator, keyed by rounded size: a block that
// comes back is handed out again for the same size, so a loop that allocates the same shapes
// every step calls the allocator only in its first step. `Blocks` is the allocator: static
// allocate(bytes), deallocate(p, bytes), round_up(bytes) and kDefaultLimit (the most bytes kept
// cached; beyond it freed blocks go back). The host's is HostBlocks below; the CUDA backend's
// (cuda/include/sinklab/cuda/memory.cuh) puts device memory behind the same cache. Thread-safe.
template <class Blocks>
class BlockCache {
 public:
  static BlockCache& instance() {
    static BlockCache* cache = new BlockCache();  // leaked on purpose: outlives static tensors
    return *cache;
  }

  void* acquire(std::size_t bytes) {
    if (bytes > std::numeric_limits<std::size_t>::max() / 2) throw std::bad_alloc();
    bytes = Blocks::round_up(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        ++hits_;
        return p;
      }
      ++misses_;
    }
    return Blocks::allocate(bytes);
  }

  void release(void* p, std::size_t bytes) {
    bytes = Blocks::round_up(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + bytes <= limit_) {
        free_[bytes].push_back(p);
        cached_ += bytes;
        return;
      }
    }
    Blocks::deallocate(p, bytes);
  }

  // Returns every cached block to the allocator.
  void trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [bytes, blocks] : free_)
      for (void* p : blocks) Blocks::deallocate(p, bytes);
    free_.clear();
    cached_ = 0;
  }

  void set_limit(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = bytes;
  }
  std::size_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }
  // Number of allocations that had to go to the allocator.
  std::size_t misses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return misses_;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
  std::size_t limit_ = Blocks::kDefaultLimit;
  std::size_t hits_ = 0, misses_ = 0;
};

// Host blocks: 64-byte aligned; from 1 MiB on, whole 2 MiB pages (see the top of this file).
struct HostBlocks {
  static constexpr std::size_t kDefaultLimit = std::size_t{2} << 30;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static std::size_t round_up(std::size_t b) {
    const std::size_t unit = b >= kHugePage / 2 ? kHugePage : 64;
    return b == 0 ? 64 : (b + unit - 1) / unit * unit;
  }
  // `bytes` as rounded by round_up: a whole number of huge pages from kHugePage on.
  static void* allocate(std::size_t bytes) {
#if defined(__linux__)
    if (bytes >= kHugePage) {
      // Map a page more than needed and return the unaligned ends, so the block starts on a
      // 2 MiB boundary without aligned_alloc's padding staying mapped.
      void* m = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(m);
      const std::uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
      if (start > base) ::munmap(m, start - base);
      if (const std::uintptr_t end = base + bytes + kHugePage; end > start + bytes)
        ::munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
      void* p = reinterpret_cast<void*>(start);
#if defined(MADV_HUGEPAGE)
      ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: where refused, the block has 4 KiB pages
#endif
      return p;
    }
#endif
    void* p = std::aligned_alloc(bytes >= kHugePage ? kHugePage : 64, bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  static void deallocate(void* p, std::size_t bytes) {
#if defined(__linux__)
    if (bytes >= kHugePage) {
      ::munmap(p, bytes);
      return;
    }
#endif
    std::free(p);
  }
};

// The host's block cache (what memory<cpu> allocates from).
using BlockPool = BlockCache<HostBlocks>;

// Allocates n elements of T from the pool; memory is uninitialised.
template <class T>
std::shared_ptr<T[]> allocate_host(std::size_t n) {
  if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
  const std::size_t bytes = n * sizeof(T);
  T* p = static_cast<T*>(BlockPool::instance().acquire(bytes));
  return std::shared_ptr<T[]>(p, [bytes](T* q) { BlockPool::instance().release(q, bytes); });
}

// The cpu's memory: pooled host buffers, memcpy and std::fill. A device whose memory the host
// may read (a test device, say) can reuse it by deriving from it.
template <>
struct memory<cpu> {
  template <class T>
  static std::shared_ptr<T[]> allocate(std::size_t n) {
    return allocate_host<T>(n);
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t n) {
    if (n) std::memcpy(dst, src, sizeof(T) * n);
  }
  // Large fills (zeroed outputs, gradient buffers) run on every thread: one core's store
  // bandwidth is half the machine's.
  template <class T>
  static void fill(T* dst, std::size_t n, T v) {
    parallel_for(0, static_cast<int64_t>(n), int64_t{1} << 15,
                 [dst, v](int64_t lo, int64_t hi) { std::fill(dst + lo, dst + hi, v); });
  }
  template <class T>
  static void to_host(T* host, const T* src, std::size_t n) {
    copy(host, src, n);
  }
  template <class T>
  static void from_host(T* dst, const T* host, std::size_t n) {
    copy(dst, host, n);
  }
  // dst (dense) ← the elements of src at the given strides, in row-major order.
  template <class T>
  static void gather(T* dst, const T* src, const int64_t* shape, const int64_t* strides, int rank) {
    for_each_strided(shape, strides, rank, [&](int64_t k, int64_t o) { dst[k] = src[o]; });
  }
  // The elements of dst at the given strides ← src (dense), in row-major order.
  template <class T>
  static void scatter(T* dst, const T* src, const int64_t* shape, const int64_t* strides, int rank) {
    for_each_strided(shape, strides, rank, [&](int64_t k, int64_t o) { dst[o] = src[k]; });
  }
};

}  // namespace sinklab
