// parallel_for over [begin, end) in chunks, on OpenMP threads when built with OpenMP.
#pragma once
#include <algorithm>
#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace sinklab {

inline int num_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Sets the threads used by sinklab's loops and by Eigen's GEMM (both use OpenMP).
inline void set_num_threads(int n) {
#if defined(_OPENMP)
  omp_set_num_threads(std::max(1, n));
#else
  (void)n;
#endif
}

inline bool in_parallel_region() {
#if defined(_OPENMP)
  return omp_in_parallel();
#else
  return false;
#endif
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
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = begin + c * step;
    const int64_t hi = std::min(end, lo + step);
    if (lo < hi) f(lo, hi);
  }
}

}  // namespace sinklab
