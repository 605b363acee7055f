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
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "sinklab/core/config.hpp"

#if !defined(__CUDACC__)  // the emulator is for host compilers; nvcc builds get simt::Cuda
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "sinklab/core/error.hpp"
#endif

namespace sinklab::simt {

inline constexpr int kWarp = 32;

// e^x where a kernel rounds the result to bf16 / fp16 next (the tensor-core attention's
// weights): on a GPU the SFU's 2^x of x·log2(e) (__expf: two instructions and no branch; its
// error, at most 2 + 1.2·|x| ulp by the CUDA Math API, is 1e-5 relative even at x = −80, far
// below that rounding); std::exp on the emulator.
SINKLAB_HD inline float exp_fast(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return std::exp(x);
#endif
}
// exp_fast as the exponential of a score family's row update (policy/row_update.hpp).
struct FastExp {
  SINKLAB_HD static float apply(float x) { return exp_fast(x); }
};

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
    extern __shared__ __align__(128) unsigned char sinklab_shared_memory[];  // cp.async, ldmatrix: 16-byte rows
    return reinterpret_cast<T*>(sinklab_shared_memory);
  }
  // The sum over the 32 lanes of this thread's warp, on every lane (xor butterfly).
  template <class T>
  __device__ T warp_sum(T v) const {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += shfl_xor(v, offset);
    return v;
  }
  // Lane (lane ^ mask)'s v, on every lane of the warp.
  template <class T>
  __device__ T shfl_xor(T v, int mask) const {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
};
#endif

#if !defined(__CUDACC__)
// A reusable barrier for n threads: an arrival count and a generation the waiters watch
// (std::atomic wait/notify, a futex, after a few yields: the emulator runs far more threads than
// cores and meets at a barrier for every warp instruction, so a mutex and a condition variable
// cost twice the time). Not std::barrier: with GCC 12's, emulated kernels gave wrong results now
// and then on a loaded machine (as if a phase let a thread through early). The last arrival
// resets the count before it advances the generation, so a thread released into the next phase
// always finds the count at zero.
class Barrier {
 public:
  explicit Barrier(int64_t n) : n_(n) {}
  void arrive_and_wait() {
    const uint32_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      generation_.notify_all();
      return;
    }
    for (int spin = 0; spin < 16 && generation_.load(std::memory_order_acquire) == generation; ++spin)
      std::this_thread::yield();
    while (generation_.load(std::memory_order_acquire) == generation)
      generation_.wait(generation, std::memory_order_acquire);
  }

 private:
  const int64_t n_;
  std::atomic<int64_t> arrived_{0};
  std::atomic<uint32_t> generation_{0};
};

// One emulated CUDA thread: its indices, its block's barrier, shared memory and warp exchange.
class Emulated {
 public:
  struct Block {
    int64_t threads = 0;
    Barrier all;
    std::vector<std::unique_ptr<Barrier>> warps;
    std::vector<uint64_t> words;  // kWords per thread: what a lane gives a shuffle or a matrix instruction
    std::vector<std::max_align_t> shared;
    std::size_t shared_bytes;
    Block(int64_t n, std::size_t bytes)
        : threads(n), all(n), words(static_cast<std::size_t>(n) * kWords),
          shared((bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)), shared_bytes(bytes) {
      for (int64_t w = 0; w < n / kWarp; ++w) warps.push_back(std::make_unique<Barrier>(kWarp));
    }
  };

  static constexpr int kWords = 16;

  // One cp.async of this thread: `bytes` from src to dst (zeros when src is null), performed when
  // a cp.async.wait_group lets its group complete (simt_mma.hpp).
  struct AsyncCopy {
    void* dst;
    const void* src;
    int bytes;
  };
  struct AsyncCopies {
    std::vector<AsyncCopy> open;                 // issued since the last commit
    std::vector<std::vector<AsyncCopy>> groups;  // committed, oldest first
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
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += shfl_xor(v, offset);
    return v;
  }
  template <class T>
  T shfl_xor(T v, int mask) const {
    static_assert(sizeof(T) <= sizeof(uint64_t), "simt::Emulated::shfl_xor: values of up to 8 bytes");
    uint64_t mine = 0;
    std::memcpy(&mine, &v, sizeof(T));
    T other;
    warp_exchange(&mine, 1,
                  [&](const uint64_t* w) { std::memcpy(&other, &w[(lane() ^ mask) * kWords], sizeof(T)); });
    return other;
  }

  // The warp's exchange under its shuffles and matrix instructions (simt_mma.hpp): this thread
  // posts n ≤ kWords words, then read(words) sees every lane's (lane l's at words[l · kWords]);
  // the warp meets before and after, so the slots are free again on return.
  template <class Read>
  void warp_exchange(const uint64_t* mine, int n, Read&& read) const {
    Barrier& warp = *b_->warps[static_cast<std::size_t>(thread_ / kWarp)];
    uint64_t* slots = b_->words.data() + (thread_ / kWarp) * kWarp * kWords;
    for (int x = 0; x < n; ++x) slots[lane() * kWords + x] = mine[x];
    warp.arrive_and_wait();
    read(static_cast<const uint64_t*>(slots));
    warp.arrive_and_wait();
  }
  // Whether [p, p + bytes) lies in this block's shared memory.
  bool in_shared(const void* p, std::size_t bytes) const {
    const auto* base = reinterpret_cast<const unsigned char*>(b_->shared.data());
    const auto* c = static_cast<const unsigned char*>(p);
    return c >= base && c + bytes <= base + b_->shared_bytes;
  }
  AsyncCopies& async_copies() { return async_; }

 private:
  Block* b_;
  int64_t thread_, block_, blocks_;
  AsyncCopies async_;
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
