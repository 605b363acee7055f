// The byte counter behind the attention memory benchmark: what the CPU attention kernels
// allocate — outputs when created, scratch (the kernels' Scratch and their block products'
// packed operands) while alive. Its own header so that the block products (block_products.hpp),
// which sit below the kernels, count in it too.
#pragma once
#include <atomic>
#include <cstdint>

namespace sinklab::kernels::cpu {

// Live bytes, and their peak since reset(): what bench/attention.cpp reports as memory vs T.
class AttentionMemory {
 public:
  static void reset() {
    live().store(0);
    peak().store(0);
  }
  static int64_t peak_bytes() { return peak().load(); }
  static void add(int64_t bytes) {
    const int64_t now = live().fetch_add(bytes) + bytes;
    int64_t p = peak().load();
    while (now > p && !peak().compare_exchange_weak(p, now)) {
    }
  }
  static void sub(int64_t bytes) { live().fetch_sub(bytes); }

 private:
  static std::atomic<int64_t>& live() {
    static std::atomic<int64_t> v{0};
    return v;
  }
  static std::atomic<int64_t>& peak() {
    static std::atomic<int64_t> v{0};
    return v;
  }
};

}  // namespace sinklab::kernels::cpu
