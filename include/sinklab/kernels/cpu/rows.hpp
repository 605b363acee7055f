// Row-parallel helpers of the CPU row kernels (norms, gate activations, RoPE): the grain of a
// parallel loop over rows of n elements, and deterministic column sums over rows.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"

namespace sinklab::kernels::cpu::detail {

inline int64_t row_grain(int64_t n) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)); }

// Runs f(r0, r1, scratch) over chunks of [0, rows); each chunk gets its own zeroed scratch of
// `width` elements, and the scratches are summed into `out` (accumulating) in chunk order. With
// one chunk f writes into a zeroed scratch too, so f may always assume a private, zeroed buffer.
// The chunks depend on the shape only (at most kMaxChunks of at least row_grain(n) rows), never
// on the thread count or on being nested, so the sums are the same bits on any number of threads.
template <class T, class F>
void rows_with_sums(int64_t rows, int64_t n, int64_t width, T* out, F&& f) {
  constexpr int64_t kMaxChunks = 8;
  const int64_t per_chunk = std::max<int64_t>(row_grain(n), 1);
  const int64_t chunks = std::clamp<int64_t>((rows + per_chunk - 1) / per_chunk, 1, kMaxChunks);
  std::vector<T> scratch(static_cast<std::size_t>(chunks * width), T(0));
  const int64_t step = (rows + chunks - 1) / chunks;
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * step, r1 = std::min(rows, r0 + step);
      if (r0 < r1) f(r0, r1, scratch.data() + c * width);
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    const T* s = scratch.data() + c * width;
    simd::loop<T>(width, [&](auto v, int64_t i) {
      using V = decltype(v);
      simd::store(out + i, simd::load<V>(out + i) + simd::load<V>(s + i));
    });
  }
}

}  // namespace sinklab::kernels::cpu::detail
