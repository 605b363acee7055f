// Host launchers for the gate-activation product (kernels/cuda/act_mul.hpp) and the GLU
// feed-forward's two GEMMs with it, with kernels::cpu's signatures (kernels/cpu/act_mul.hpp,
// glu.hpp), on device pointers. The CPU runs the activation in the GEMM's row epilogue; here the
// GEMM is cuBLAS (gemm.cuh, with the precision argument) and the activation a second kernel over
// its result: the same values up to the GEMM's rounding, one more pass over [rows, 2h].
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/gemm.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cuda/act_mul.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::kernels::cuda::host {

namespace detail {

template <class Act, class T>
__global__ void act_mul_forward_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy,
                                       int64_t rows, int64_t h) {
  simt::Cuda ctx;
  kernels::cuda::act_mul_forward<Act>(ctx, a, lda, b, ldb, y, ldy, rows, h);
}
template <class Act, class T>
__global__ void act_mul_backward_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, const T* gy, int64_t ldg,
                                        T* ga, int64_t ldga, T* gb, int64_t ldgb, int64_t rows, int64_t h) {
  simt::Cuda ctx;
  kernels::cuda::act_mul_backward<Act>(ctx, a, lda, b, ldb, gy, ldg, ga, ldga, gb, ldgb, rows, h);
}

}  // namespace detail

// y[r, :] = act(a[r, :]) ⊙ b[r, :] with row strides lda, ldb, ldy (elements).
template <act::Activation Act, class T>
void act_mul_forward(const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy, int64_t rows, int64_t h) {
  const int64_t n = rows * h;
  if (n <= 0) return;
  detail::act_mul_forward_kernel<Act><<<blocks_for(n), kThreads>>>(a, lda, b, ldb, y, ldy, rows, h);
  check(cudaGetLastError(), "act_mul_forward kernel launch");
}
// ga = gy ⊙ b ⊙ act'(a), gb = gy ⊙ act(a); written, either may be null; ga may be gy itself.
template <act::Activation Act, class T>
void act_mul_backward(const T* a, int64_t lda, const T* b, int64_t ldb, const T* gy, int64_t ldg, T* ga, int64_t ldga,
                      T* gb, int64_t ldgb, int64_t rows, int64_t h) {
  const int64_t n = rows * h;
  if (n <= 0 || (!ga && !gb)) return;
  detail::act_mul_backward_kernel<Act><<<blocks_for(n), kThreads>>>(a, lda, b, ldb, gy, ldg, ga, ldga, gb, ldgb, rows, h);
  check(cudaGetLastError(), "act_mul_backward kernel launch");
}

// ab = x [rows, d] · w_up [d, 2h] and hidden = act(ab[:, :h]) ⊙ ab[:, h:] [rows, h].
template <act::Activation Act, class T>
void glu_up(const T* x, const T* w_up, int64_t rows, int64_t d, int64_t h, T* ab, T* hidden,
            kernels::Precision p = kernels::Precision::fp32) {
  if (rows <= 0 || h <= 0) return;  // nothing to write (cuBLAS would refuse leading dimensions of 0)
  const int64_t w = 2 * h;
  gemm(kernels::Trans::N, kernels::Trans::N, rows, w, d, T(1), x, d, w_up, w, T(0), ab, w, p);
  act_mul_forward<Act>(ab, w, ab + h, w, hidden, h, rows, h);
}

// gab [rows, 2h] = [da | db]: g [rows, n] · w_downᵀ into gab's first half, then [da | db] in
// place from it and ab [rows, 2h] = [a | b].
template <act::Activation Act, class T>
void glu_hidden_grad(const T* g, const T* w_down, const T* ab, int64_t rows, int64_t n, int64_t h, T* gab,
                     kernels::Precision p = kernels::Precision::fp32) {
  if (rows <= 0 || h <= 0) return;
  const int64_t w = 2 * h;
  gemm(kernels::Trans::N, kernels::Trans::T, rows, h, n, T(1), g, n, w_down, n, T(0), gab, w, p);
  act_mul_backward<Act>(ab, w, ab + h, w, gab, w, gab, w, gab + h, w, rows, h);
}

}  // namespace sinklab::kernels::cuda::host
