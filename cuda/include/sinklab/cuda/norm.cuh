// Host launchers of the normalisation kernels (kernels/cuda/rms_norm.hpp, norm.hpp): RMSNorm
// (with the optional pre-scale), LayerNorm and DyT, forward and backward, with kernels::cpu's
// signatures (kernels/cpu/norm.hpp) on device pointers. Row kernels are launched as the
// row-wise ones (rowwise.cuh's row_launch); parameter gradients by a thread per column.
// Per-row scratch comes from memory<cuda> (cached blocks, safe to release once queued on the
// default stream).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/cuda/rowwise.cuh"
#include "sinklab/kernels/cuda/norm.hpp"
#include "sinklab/kernels/cuda/rms_norm.hpp"

namespace sinklab::kernels::cuda::host {

// Threads per block of the column kernels: small blocks, so that rows of a few hundred columns
// still spread over several multiprocessors.
constexpr int kColumnThreads = 64;
inline unsigned column_blocks(int64_t columns) {
  const int64_t b = (columns + kColumnThreads - 1) / kColumnThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

namespace detail {

template <class T>
__global__ void rms_forward_kernel(const T* x, const T* pre, const T* gain, T* y, T* rstd, int64_t rows, int64_t n,
                                   T eps) {
  simt::Cuda ctx;
  kernels::cuda::rms_forward(ctx, x, pre, gain, y, rstd, rows, n, eps);
}
template <class T>
__global__ void rms_backward_input_kernel(const T* x, const T* pre, const T* gain, const T* rstd, const T* gy, T* gx,
                                          const T* gx_prior, T* row_k, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::rms_backward_input(ctx, x, pre, gain, rstd, gy, gx, gx_prior, row_k, rows, n);
}
template <class T>
__global__ void rms_backward_params_kernel(const T* x, const T* pre, const T* gain, const T* rstd, const T* row_k,
                                           const T* gy, T* ggain, T* gpre, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::rms_backward_params(ctx, x, pre, gain, rstd, row_k, gy, ggain, gpre, rows, n);
}
template <class T>
__global__ void layer_norm_forward_kernel(const T* x, const T* gain, const T* bias, T* y, T* mean, T* rstd,
                                          int64_t rows, int64_t n, T eps) {
  simt::Cuda ctx;
  kernels::cuda::layer_norm_forward(ctx, x, gain, bias, y, mean, rstd, rows, n, eps);
}
template <class T>
__global__ void layer_norm_backward_input_kernel(const T* x, const T* gain, const T* mean, const T* rstd, const T* gy,
                                                 T* gx, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::layer_norm_backward_input(ctx, x, gain, mean, rstd, gy, gx, rows, n);
}
template <class T>
__global__ void layer_norm_backward_params_kernel(const T* x, const T* mean, const T* rstd, const T* gy, T* ggain,
                                                  T* gbias, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::layer_norm_backward_params(ctx, x, mean, rstd, gy, ggain, gbias, rows, n);
}
template <class T>
__global__ void dyt_forward_kernel(const T* x, T alpha, const T* gamma, const T* beta, T* y, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::dyt_forward(ctx, x, alpha, gamma, beta, y, rows, n);
}
template <class T>
__global__ void dyt_backward_input_kernel(const T* x, T alpha, const T* gamma, const T* gy, T* gx, T* row_alpha,
                                          int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::dyt_backward_input(ctx, x, alpha, gamma, gy, gx, row_alpha, rows, n);
}
template <class T>
__global__ void dyt_backward_params_kernel(const T* x, T alpha, const T* gy, const T* row_alpha, T* galpha, T* ggamma,
                                           T* gbeta, int64_t rows, int64_t n) {
  simt::Cuda ctx;
  kernels::cuda::dyt_backward_params(ctx, x, alpha, gy, row_alpha, galpha, ggamma, gbeta, rows, n);
}

}  // namespace detail

// RMSNorm: z = x ⊙ pre (pre may be null), rstd = 1/√(mean(z²) + eps), y = z · rstd ⊙ gain.
template <class T>
void rms_forward(const T* x, const T* pre, const T* gain, T* y, T* rstd, int64_t rows, int64_t n, T eps) {
  if (rows <= 0) return;
  const RowLaunch l = row_launch(rows, n);
  detail::rms_forward_kernel<T><<<l.grid, l.threads, simt::block_sum_shared_bytes<T>(l.threads)>>>(
      x, pre, gain, y, rstd, rows, n, eps);
  check(cudaGetLastError(), "rms_forward kernel launch");
}

// RMSNorm backward: gx = gx_prior + the input gradient (gx_prior null: written; it may equal gx),
// ggain and gpre accumulated; gx, ggain or gpre may be null.
template <class T>
void rms_backward(const T* x, const T* pre, const T* gain, const T* rstd, const T* gy, T* gx, const T* gx_prior,
                  T* ggain, T* gpre, int64_t rows, int64_t n) {
  if (rows <= 0) return;
  const bool need_k = pre && gpre;  // gpre reads each row's k, which only the input kernel computes
  if (!gx && !ggain && !need_k) return;
  std::shared_ptr<T[]> row_k;
  if (need_k) row_k = memory<sinklab::cuda>::allocate<T>(static_cast<std::size_t>(rows));
  if (gx || need_k) {
    const RowLaunch l = row_launch(rows, n);
    detail::rms_backward_input_kernel<T><<<l.grid, l.threads, simt::block_sum_shared_bytes<T>(l.threads)>>>(
        x, pre, gain, rstd, gy, gx, gx ? gx_prior : nullptr, row_k.get(), rows, n);
    check(cudaGetLastError(), "rms_backward_input kernel launch");
  }
  if (ggain || need_k) {
    detail::rms_backward_params_kernel<T><<<column_blocks(n), kColumnThreads>>>(x, pre, gain, rstd, row_k.get(), gy,
                                                                               ggain, need_k ? gpre : nullptr, rows, n);
    check(cudaGetLastError(), "rms_backward_params kernel launch");
  }
}

// LayerNorm: μ = mean(x), rstd = 1/√(mean((x−μ)²) + eps), y = (x−μ)·rstd ⊙ gain + bias.
template <class T>
void layer_norm_forward(const T* x, const T* gain, const T* bias, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                        T eps) {
  if (rows <= 0) return;
  const RowLaunch l = row_launch(rows, n);
  detail::layer_norm_forward_kernel<T><<<l.grid, l.threads, simt::block_sum_shared_bytes<T>(l.threads)>>>(
      x, gain, bias, y, mean, rstd, rows, n, eps);
  check(cudaGetLastError(), "layer_norm_forward kernel launch");
}

// LayerNorm backward: gx written, ggain and gbias accumulated; any of them may be null.
template <class T>
void layer_norm_backward(const T* x, const T* gain, const T* mean, const T* rstd, const T* gy, T* gx, T* ggain,
                         T* gbias, int64_t rows, int64_t n) {
  if (rows <= 0) return;
  if (gx) {
    const RowLaunch l = row_launch(rows, n);
    detail::layer_norm_backward_input_kernel<T><<<l.grid, l.threads, simt::block_sum_shared_bytes<T>(l.threads)>>>(
        x, gain, mean, rstd, gy, gx, rows, n);
    check(cudaGetLastError(), "layer_norm_backward_input kernel launch");
  }
  if (ggain || gbias) {
    detail::layer_norm_backward_params_kernel<T><<<column_blocks(n), kColumnThreads>>>(x, mean, rstd, gy, ggain, gbias,
                                                                                      rows, n);
    check(cudaGetLastError(), "layer_norm_backward_params kernel launch");
  }
}

// DyT: y = gamma ⊙ tanh(alpha · x) + beta, alpha a scalar (on the host).
template <class T>
void dyt_forward(const T* x, T alpha, const T* gamma, const T* beta, T* y, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  detail::dyt_forward_kernel<T><<<blocks_for(static_cast<std::size_t>(rows * n)), kThreads>>>(x, alpha, gamma, beta, y,
                                                                                              rows, n);
  check(cudaGetLastError(), "dyt_forward kernel launch");
}

// DyT backward: gx written, galpha (one element, on the device), ggamma and gbeta accumulated;
// any of them may be null.
template <class T>
void dyt_backward(const T* x, T alpha, const T* gamma, const T* gy, T* gx, T* galpha, T* ggamma, T* gbeta,
                  int64_t rows, int64_t n) {
  if (rows <= 0) return;
  std::shared_ptr<T[]> row_alpha;
  if (galpha) row_alpha = memory<sinklab::cuda>::allocate<T>(static_cast<std::size_t>(rows));
  if (gx || galpha) {
    const RowLaunch l = row_launch(rows, n);
    detail::dyt_backward_input_kernel<T><<<l.grid, l.threads, simt::block_sum_shared_bytes<T>(l.threads)>>>(
        x, alpha, gamma, gy, gx, row_alpha.get(), rows, n);
    check(cudaGetLastError(), "dyt_backward_input kernel launch");
  }
  if (galpha || ggamma || gbeta) {
    detail::dyt_backward_params_kernel<T><<<column_blocks(n + 1), kColumnThreads>>>(x, alpha, gy, row_alpha.get(),
                                                                                   galpha, ggamma, gbeta, rows, n);
    check(cudaGetLastError(), "dyt_backward_params kernel launch");
  }
}

}  // namespace sinklab::kernels::cuda::host
