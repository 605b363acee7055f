// The SIMT context a CUDA kernel body is written against, so the same body runs on a GPU and,
// in tests on a machine without one, on the CPU:
//
//   template <class Ctx, class T>
//   SINKLAB_HD void my_kernel(Ctx& ctx, const T* x, T* y, int64_t n) {
//     T* scratch = ctx.template shared<T>();                   // the block's dynamic shared memory
//     for (int64_t i = ctx.thread(); i < n; i += ctx.threads()) ...
//     const T total = simt::block_sum(ctx, partial, scratch); // warp shuffles, then shared memory
//   }
//
//   simt::Cuda    (nvcc, device code) threadIdx / blockIdx / blockDim / gridDim, __syncthreads,
//                 extern __shared__, __shfl_xor_sync; a __global__ wrapper builds one and calls the body
//   simt::emulate(grid, block, shared_bytes, body)  (host compilers only; nvcc builds leave the
//                 emulator out) runs every block of the grid, each as
//                 `block` std::threads that meet at a barrier for sync() and, per warp of 32,
//                 for the shuffle steps; shared memory is one buffer per block
//
// The emulator executes the same arithmetic in the same order as the device: warp_sum is the
// xor butterfly (v += shfl_xor(v, 16), 8, 4, 2, 1) on both, so a kernel's result on the emulator
// is what the GPU computes up to the device's own math functions (sqrt, exp: CUDA's are within
// 1–2 ulp). What it does not model: memory coalescing, bank conflicts, occupancy, warp
// divergence (a barrier reached by some threads only hangs here as it is undefined there), and
// timing; blocks run one after another. Blocks must be whole warps (a multiple of 32 threads).
#pragma once
#include <cstddef>
#include <cstdint>

#include "sinklab/core/config.hpp"

#if !defined(__CUDACC__)  // the emulator is for host compilers; nvcc builds get simt::Cuda
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "sinklab/core/error.hpp"
#endif

namespace sinklab::simt {

inline constexpr int kWarp = 32;

#if defined(__CUDACC__)
// The context of a thread of a CUDA kernel.
struct Cuda {
  __device__ int64_t thread() const { return threadIdx.x; }
  __device__ int64_t threads() const { return blockDim.x; }
  __device__ int64_t block() const { return blockIdx.x; }
  __device__ int64_t blocks() const { return gridDim.x; }
  __device__ int lane() const { return static_cast<int>(threadIdx.x % kWarp); }
  __device__ void sync() const { __syncthreads(); }
  template <class T>
  __device__ T* shared() const {
    extern __shared__ unsigned char sinklab_shared_memory[];
    return reinterpret_cast<T*>(sinklab_shared_memory);
  }
  // The sum over the 32 lanes of this thread's warp, on every lane (xor butterfly).
  template <class T>
  __device__ T warp_sum(T v) const {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
  }
};
#endif

#if !defined(__CUDACC__)
// A reusable barrier for n threads. Not std::barrier: with GCC 12's, emulated kernels give wrong
// results now and then on a loaded machine (as if a phase let a thread through early); a mutex
// and a generation count leave no doubt, and the emulator runs tiny grids where their cost does
// not matter.
class Barrier {
 public:
  explicit Barrier(int64_t n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int64_t n_, arrived_ = 0;
  uint64_t generation_ = 0;
};

// One emulated CUDA thread: its indices, its block's barrier, shared memory and warp exchange.
class Emulated {
 public:
  struct Block {
    int64_t threads = 0;
    Barrier all;
    std::vector<std::unique_ptr<Barrier>> warps;
    std::vector<double> exchange;  // kWarp slots per warp (any T up to 8 bytes)
    std::vector<std::max_align_t> shared;
    Block(int64_t n, std::size_t shared_bytes)
        : threads(n), all(n), exchange(static_cast<std::size_t>(n)),
          shared((shared_bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)) {
      for (int64_t w = 0; w < n / kWarp; ++w) warps.push_back(std::make_unique<Barrier>(kWarp));
    }
  };

  Emulated(Block& b, int64_t thread, int64_t block, int64_t blocks)
      : b_(&b), thread_(thread), block_(block), blocks_(blocks) {}

  int64_t thread() const { return thread_; }
  int64_t threads() const { return b_->threads; }
  int64_t block() const { return block_; }
  int64_t blocks() const { return blocks_; }
  int lane() const { return static_cast<int>(thread_ % kWarp); }
  void sync() const { b_->all.arrive_and_wait(); }
  template <class T>
  T* shared() const {
    return reinterpret_cast<T*>(b_->shared.data());
  }
  template <class T>
  T warp_sum(T v) const {
    static_assert(sizeof(T) <= sizeof(double), "simt::Emulated::warp_sum: values of up to 8 bytes");
    Barrier& warp = *b_->warps[static_cast<std::size_t>(thread_ / kWarp)];
    T* slots = reinterpret_cast<T*>(b_->exchange.data() + (thread_ / kWarp) * kWarp);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      slots[lane()] = v;
      warp.arrive_and_wait();
      const T other = slots[lane() ^ offset];
      warp.arrive_and_wait();  // everyone has read before the next step writes
      v += other;
    }
    return v;
  }

 private:
  Block* b_;
  int64_t thread_, block_, blocks_;
};

// Runs body(ctx) for every thread of a grid of `grid` blocks of `block` threads with
// `shared_bytes` of shared memory per block. An exception in any thread is rethrown (the
// block's other threads are left to finish or are stopped by it reaching no barrier: keep
// kernels free of throws, as on the device).
template <class Body>
void emulate(int64_t grid, int64_t block, std::size_t shared_bytes, Body&& body) {
  SINKLAB_CHECK(grid > 0 && block > 0 && block % kWarp == 0 && block <= 1024, "simt::emulate: a grid of ", grid,
                " blocks of ", block, " threads; blocks must be 1-1024 threads in whole warps of ", kWarp);
  for (int64_t b = 0; b < grid; ++b) {
    Emulated::Block state(block, shared_bytes);
    std::exception_ptr error;
    std::mutex error_mutex;
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(block));
    for (int64_t t = 0; t < block; ++t)
      threads.emplace_back([&, t] {
        Emulated ctx(state, t, b, grid);
        try {
          body(ctx);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      });
    for (auto& th : threads) th.join();
    if (error) std::rethrow_exception(error);
  }
}
#endif

// Shared memory block_sum needs for a block of `threads`: a value per warp, and never fewer than
// four. With one warp of doubles, compute-sanitizer's memcheck on an H100 saw the compiled
// reduction read 16 bytes of an 8-byte allocation (it loads the warps' sums in pairs).
template <class T>
SINKLAB_HD constexpr std::size_t block_sum_shared_bytes(int64_t threads) {
  const int64_t warps = threads / kWarp;
  return static_cast<std::size_t>(warps > 4 ? warps : 4) * sizeof(T);
}

// The sum of `v` over the block, on every thread: warp sums, then the warps' sums through
// `scratch` (shared memory of at least threads()/32 values). Every thread must call it; it
// syncs the block, so `scratch` is free again when it returns.
template <class Ctx, class T>
SINKLAB_HD T block_sum(Ctx& ctx, T v, T* scratch) {
  v = ctx.warp_sum(v);
  const int64_t warps = ctx.threads() / kWarp;
  if (ctx.lane() == 0) scratch[ctx.thread() / kWarp] = v;
  ctx.sync();
  T total = T(0);
  for (int64_t w = 0; w < warps; ++w) total += scratch[w];  // every thread, in the same order
  ctx.sync();
  return total;
}

// Shared memory block_fold needs: a value per thread.
template <class T>
SINKLAB_HD constexpr std::size_t block_fold_shared_bytes(int64_t threads) {
  return static_cast<std::size_t>(threads) * sizeof(T);
}

struct MaxOp {  // std::max's choice (a NaN second argument is passed over, as on the CPU)
  template <class T>
  SINKLAB_HD T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};
struct MinOp {
  template <class T>
  SINKLAB_HD T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

// f(v) folded over the block, on every thread, for an associative and commutative f (MaxOp,
// MinOp: exact in any order, so a tree through shared memory gives what a warp shuffle would;
// the context has shuffles for sums only). `scratch`: shared memory of threads() values
// (block_fold_shared_bytes). Every thread must call it; it syncs the block, so `scratch` is free
// again when it returns.
template <class Ctx, class T, class F>
SINKLAB_HD T block_fold(Ctx& ctx, T v, T* scratch, F f) {
  const int64_t t = ctx.thread(), n = ctx.threads();
  scratch[t] = v;
  ctx.sync();
  int64_t half = 1;
  while (2 * half < n) half *= 2;  // the largest power of two below n: blocks need not be 2^k
  for (; half > 0; half /= 2) {
    if (t < half && t + half < n) scratch[t] = f(scratch[t], scratch[t + half]);
    ctx.sync();
  }
  const T result = scratch[0];
  ctx.sync();
  return result;
}

}  // namespace sinklab::simt
