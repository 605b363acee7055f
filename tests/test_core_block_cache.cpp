// core::BlockCache, the size-keyed cache in front of a device's allocator (the host's BlockPool
// and the CUDA backend's device pool), against an allocator that counts what reaches it.
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>

#include "sinklab/core/storage.hpp"

using namespace sinklab;

namespace {

struct CountingBlocks {
  static constexpr std::size_t kDefaultLimit = 4096;
  static inline int allocations = 0, deallocations = 0;
  static inline std::set<void*> live;
  static std::size_t round_up(std::size_t b) { return b == 0 ? 256 : (b + 255) / 256 * 256; }
  static void* allocate(std::size_t bytes) {
    ++allocations;
    void* p = std::malloc(bytes);
    live.insert(p);
    return p;
  }
  static void deallocate(void* p, std::size_t) {
    ++deallocations;
    live.erase(p);
    std::free(p);
  }
};

}  // namespace

TEST_CASE("BlockCache: a freed block is reused for the same rounded size; the limit and trim send blocks back") {
  auto& cache = BlockCache<CountingBlocks>::instance();
  void* a = cache.acquire(1000);  // rounds to 1024
  CHECK(CountingBlocks::allocations == 1);
  cache.release(a, 1000);
  CHECK(cache.cached_bytes() == 1024);
  void* b = cache.acquire(1020);  // same rounded size: the cached block, no allocation
  CHECK(b == a);
  CHECK(CountingBlocks::allocations == 1);
  CHECK(cache.misses() == 1);
  void* c = cache.acquire(2000);  // another size: allocated
  CHECK(CountingBlocks::allocations == 2);
  cache.release(b, 1020);
  cache.release(c, 2000);
  CHECK(cache.cached_bytes() == 1024 + 2048);
  void* big = cache.acquire(3000);  // 3072 more would pass the 4096 limit: goes back when freed
  cache.release(big, 3000);
  CHECK(CountingBlocks::deallocations == 1);
  CHECK(cache.cached_bytes() == 1024 + 2048);
  cache.trim();
  CHECK(cache.cached_bytes() == 0);
  CHECK(CountingBlocks::deallocations == 3);
  CHECK(CountingBlocks::live.empty());
}
