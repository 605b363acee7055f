// parallel_for over [begin, end) in chunks, on sinklab's own thread pool.
//
// Why not an OpenMP team: an OpenMP loop hands each thread its share up front and ends in a
// barrier, so when another process holds a core (2 shared cores here) every parallel region
// waits a scheduler time slice for the descheduled thread, and a training step made of
// hundreds of short regions slows down by an order of magnitude. Here the calling thread and
// the workers claim chunks one at a time from a shared counter, and the caller waits only for
// chunks that were actually claimed: a worker that is not running when a loop starts simply
// gets no work, and the caller finishes the loop alone.
//
// Workers spin briefly between loops (a training step issues loops microseconds apart), then
// sleep on a futex (std::atomic::wait). Nested parallel_for calls run serially on the calling
// thread; a loop issued while another thread's loop is running also runs serially.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sinklab {

namespace detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

inline int& parallel_depth() {
  thread_local int depth = 0;
  return depth;
}

struct DepthGuard {
  DepthGuard() { ++parallel_depth(); }
  ~DepthGuard() { --parallel_depth(); }
};

inline int default_threads() {
#if defined(_OPENMP)
  return std::max(1, omp_get_max_threads());  // honours OMP_NUM_THREADS
#else
  return std::max(1u, std::thread::hardware_concurrency());
#endif
}

class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool* pool = new ThreadPool();  // leaked on purpose: workers outlive static destructors
    return *pool;
  }

  int threads() const { return threads_.load(std::memory_order_relaxed); }
  void set_threads(int n) {
    n = std::max(1, n);
    std::lock_guard<std::mutex> lock(submit_);
    threads_.store(n, std::memory_order_relaxed);
    grow(n - 1);
  }

  // Runs body(c) for every c in [0, chunks) on the caller and the workers. Returns false
  // (running nothing) when another thread's loop holds the pool; the caller then runs serially.
  template <class Body>
  bool run(int64_t chunks, Body& body) {
    std::unique_lock<std::mutex> lock(submit_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    grow(threads() - 1);
    const uint32_t gen = gen_ + 1;
    gen_ = gen;
    Slot& s = slots_[gen & 1];
    s.fn.store(&invoke<Body>, std::memory_order_relaxed);
    s.ctx.store(&body, std::memory_order_relaxed);
    s.chunks.store(chunks, std::memory_order_relaxed);
    s.done.store(0, std::memory_order_relaxed);
    s.error = nullptr;
    state_.store(pack(gen, 0), std::memory_order_seq_cst);  // publishes the slot
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      wake_.fetch_add(1, std::memory_order_seq_cst);
      wake_.notify_all();
    }
    work();
    // Wait for chunks claimed by workers; a preempted worker is waited for politely.
    for (int spins = 0; s.done.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < 4096) cpu_relax();
      else std::this_thread::yield();
    }
    if (s.error) std::rethrow_exception(s.error);
    return true;
  }

 private:
  struct Slot {
    std::atomic<void (*)(void*, int64_t)> fn{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int64_t> chunks{0};
    std::atomic<int64_t> done{0};
    std::exception_ptr error;  // first exception of a chunk; written under error_mu_
  };

  ThreadPool() : threads_(default_threads()) {}

  template <class Body>
  static void invoke(void* ctx, int64_t c) {
    (*static_cast<Body*>(ctx))(c);
  }
  static uint64_t pack(uint32_t gen, uint32_t next) { return (uint64_t{gen} << 32) | next; }

  // Claims and runs chunks of the current job until none is left.
  void work() {
    DepthGuard depth;
    for (;;) {
      uint64_t st = state_.load(std::memory_order_acquire);
      const uint32_t gen = static_cast<uint32_t>(st >> 32), next = static_cast<uint32_t>(st);
      Slot& s = slots_[gen & 1];
      // The slot of `gen` is only rewritten two jobs later, which cannot start while this job
      // has unclaimed chunks, so its fields are consistent whenever the claim below succeeds.
      const int64_t chunks = s.chunks.load(std::memory_order_relaxed);
      auto* fn = s.fn.load(std::memory_order_relaxed);
      void* ctx = s.ctx.load(std::memory_order_relaxed);
      if (static_cast<int64_t>(next) >= chunks) return;
      if (!state_.compare_exchange_weak(st, pack(gen, next + 1), std::memory_order_acq_rel)) continue;
      try {
        fn(ctx, next);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!s.error) s.error = std::current_exception();
      }
      s.done.fetch_add(1, std::memory_order_release);
    }
  }

  void worker(int index) {
    uint32_t seen = static_cast<uint32_t>(state_.load(std::memory_order_acquire) >> 32);
    for (;;) {
      // Spin for a short while, then sleep until a loop is published.
      auto t0 = std::chrono::steady_clock::now();
      uint32_t gen = seen;
      for (int i = 1;; ++i) {
        gen = static_cast<uint32_t>(state_.load(std::memory_order_acquire) >> 32);
        if (gen != seen) break;
        cpu_relax();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(kSpinMicros)) {
          const uint32_t w = wake_.load(std::memory_order_seq_cst);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          if (static_cast<uint32_t>(state_.load(std::memory_order_seq_cst) >> 32) == seen)
            wake_.wait(w, std::memory_order_seq_cst);
          sleepers_.fetch_sub(1, std::memory_order_seq_cst);
          t0 = std::chrono::steady_clock::now();
        }
      }
      seen = gen;
      if (index < threads() - 1) work();  // workers beyond a lowered thread count stay idle
    }
  }

  // Starts workers up to n; they live as long as the process.
  void grow(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      const int index = static_cast<int>(workers_.size());
      workers_.emplace_back([this, index] { worker(index); });
      workers_.back().detach();
    }
  }

  static constexpr int kSpinMicros = 200;
  std::atomic<int> threads_;
  std::mutex submit_, error_mu_;
  uint32_t gen_ = 0;  // written under submit_
  Slot slots_[2];
  std::atomic<uint64_t> state_{0};  // (generation, next chunk)
  std::atomic<uint32_t> wake_{0};
  std::atomic<int> sleepers_{0};
  std::vector<std::thread> workers_;
};

}  // namespace detail

inline int num_threads() { return detail::ThreadPool::instance().threads(); }

// Sets the threads used by sinklab's loops (the caller plus n − 1 workers). Also sets OpenMP's
// default for code outside sinklab that uses OpenMP.
inline void set_num_threads(int n) {
  detail::ThreadPool::instance().set_threads(n);
#if defined(_OPENMP)
  omp_set_num_threads(std::max(1, n));
#endif
}

// True inside a parallel_for body (sinklab's, or an OpenMP region).
inline bool in_parallel_region() {
#if defined(_OPENMP)
  if (omp_in_parallel()) return true;
#endif
  return detail::parallel_depth() > 0;
}

// Calls f(lo, hi) on disjoint chunks covering [begin, end). Chunks hold at least `grain`
// items, so small loops stay on the calling thread. Nested calls run serially.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = num_threads();
  if (threads <= 1 || n <= grain || in_parallel_region()) {
    f(begin, end);
    return;
  }
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t{threads} * 4);
  const int64_t step = (n + chunks - 1) / chunks;
  auto body = [&](int64_t c) {
    const int64_t lo = begin + c * step;
    const int64_t hi = std::min(end, lo + step);
    if (lo < hi) f(lo, hi);
  };
  if (!detail::ThreadPool::instance().run(chunks, body)) f(begin, end);
}

}  // namespace sinklab
