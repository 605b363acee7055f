// CPU rows of the gate-activation product y = act(a) ⊙ b and its backward (the fused node of
// the GLU feed-forwards and of GatedNorm's gate; autodiff/ops/glu.hpp records it).
#pragma once
#include <cstdint>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/kernels/cpu/rows.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::kernels::cpu {

// y[r, :] = act(a[r, :]) ⊙ b[r, :] with row strides lda, ldb, ldy (elements).
template <act::Activation Act, class T>
void act_mul_forward(const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy, int64_t rows, int64_t h) {
  parallel_for(0, rows, detail::row_grain(h), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* ar = a + r * lda;
      const T* br = b + r * ldb;
      T* yr = y + r * ldy;
      simd::loop<T>(h, [&](auto v, int64_t i) {
        using V = decltype(v);
        V f, df;
        act::eval<Act>(simd::load<V>(ar + i), f, df);
        simd::store(yr + i, f * simd::load<V>(br + i));
      });
    }
  });
}
// ga = gy ⊙ b ⊙ act'(a), gb = gy ⊙ act(a); written (not accumulated); either may be null. ga may
// be gy itself (same stride: each element is read before it is written), gb may not overlap gy.
template <act::Activation Act, class T>
void act_mul_backward(const T* a, int64_t lda, const T* b, int64_t ldb, const T* gy, int64_t ldg, T* ga,
                      int64_t ldga, T* gb, int64_t ldgb, int64_t rows, int64_t h) {
  parallel_for(0, rows, detail::row_grain(h), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* ar = a + r * lda;
      const T* br = b + r * ldb;
      const T* gr = gy + r * ldg;
      simd::loop<T>(h, [&](auto v, int64_t i) {
        using V = decltype(v);
        V f, df;
        act::eval<Act>(simd::load<V>(ar + i), f, df);
        const V g = simd::load<V>(gr + i);
        if (ga) simd::store(ga + r * ldga + i, g * simd::load<V>(br + i) * df);
        if (gb) simd::store(gb + r * ldgb + i, g * f);
      });
    }
  });
}
}  // namespace sinklab::kernels::cpu
