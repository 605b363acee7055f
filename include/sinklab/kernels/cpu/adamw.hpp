// The AdamW step over a parameter's n elements on the CPU: policy::adamw_update a SIMD batch at a
// time, the tail an element at a time, in parallel chunks.
#pragma once
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "sinklab/core/parallel.hpp"
#include "sinklab/policy/adamw.hpp"

namespace sinklab::kernels::cpu {

// GCC 12 flags _mm512_undefined_ps() inside its own AVX-512 sqrt intrinsic as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, const policy::AdamWCoefs<T>& c) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  parallel_for(0, n, int64_t{1} << 15, [&](int64_t lo, int64_t hi) {
    int64_t i = lo;
    for (; i + W <= hi; i += W) {
      B pb = B::load_unaligned(p + i), mb = B::load_unaligned(m + i), vb = B::load_unaligned(v + i);
      policy::adamw_update(pb, B::load_unaligned(g + i), mb, vb, c);
      pb.store_unaligned(p + i);
      mb.store_unaligned(m + i);
      vb.store_unaligned(v + i);
    }
    for (; i < hi; ++i) policy::adamw_update(p[i], g[i], m[i], v[i], c);
  });
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace sinklab::kernels::cpu
