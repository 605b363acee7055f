// The gate-activation product y = act(a) ⊙ b and its backward (kernels/cpu/act_mul.hpp) for the
// CUDA backend, written against a SIMT context (kernels/simt.hpp), with the activation's own
// SINKLAB_HD math (act::eval: the CPU's one copy). It is also the epilogue of the GLU GEMMs
// (cuda/glu.cuh), which run the GEMM on cuBLAS and then these bodies.
//
// A thread per element of the [rows, h] block (grid-stride); rows have their own strides, as the
// GLU's halves [a | b] of one [rows, 2h] buffer are read and written in place.
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/kernels/cuda/strided.hpp"
#include "sinklab/kernels/simt.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::kernels::cuda {

// y[r, :] = act(a[r, :]) ⊙ b[r, :] with row strides lda, ldb, ldy (elements).
template <act::Activation Act, class Ctx, class T>
SINKLAB_HD void act_mul_forward(Ctx& ctx, const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy,
                                int64_t rows, int64_t h) {
  detail::for_each_element(ctx, rows * h, [&](int64_t k) {
    const int64_t r = k / h, i = k % h;
    T f, df;
    act::eval<Act>(a[r * lda + i], f, df);
    y[r * ldy + i] = f * b[r * ldb + i];
  });
}

// ga = gy ⊙ b ⊙ act'(a), gb = gy ⊙ act(a); written, either may be null. ga may be gy itself
// (same stride: its thread reads the element before writing it); gb may not overlap gy, a or b.
template <act::Activation Act, class Ctx, class T>
SINKLAB_HD void act_mul_backward(Ctx& ctx, const T* a, int64_t lda, const T* b, int64_t ldb, const T* gy, int64_t ldg,
                                 T* ga, int64_t ldga, T* gb, int64_t ldgb, int64_t rows, int64_t h) {
  detail::for_each_element(ctx, rows * h, [&](int64_t k) {
    const int64_t r = k / h, i = k % h;
    T f, df;
    act::eval<Act>(a[r * lda + i], f, df);
    const T g = gy[r * ldg + i];
    if (ga) ga[r * ldga + i] = g * b[r * ldb + i] * df;
    if (gb) gb[r * ldgb + i] = g * f;
  });
}

}  // namespace sinklab::kernels::cuda
