// Host launchers for the anchor-mixing node (kernels/cuda/mix.hpp) with kernels::cpu's
// signatures (kernels/cpu/mix.hpp), on device pointers (the MixPair's too). The backward is up
// to three kernels: the input gradients (a thread per element), the per-batch-row coefficient
// partials and the γ gradient (a block per output, as wide as its terms need, up to kThreads).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cuda/mix.hpp"

namespace sinklab::kernels::cuda::host {

namespace detail {

template <class T>
__global__ void mix_pair_forward_kernel(kernels::MixPair<T> m, T* y) {
  simt::Cuda ctx;
  kernels::cuda::mix_pair_forward(ctx, m, y);
}
template <class T>
__global__ void mix_pair_backward_inputs_kernel(kernels::MixPair<T> m, const T* dy, T* da, T* ds) {
  simt::Cuda ctx;
  kernels::cuda::mix_pair_backward_inputs(ctx, m, dy, da, ds);
}
template <class T>
__global__ void mix_pair_backward_coefficients_kernel(kernels::MixPair<T> m, const T* dy, T* pl1, T* pl2) {
  simt::Cuda ctx;
  kernels::cuda::mix_pair_backward_coefficients(ctx, m, dy, pl1, pl2);
}
template <class T>
__global__ void mix_pair_backward_gamma_kernel(kernels::MixPair<T> m, const T* dy, T* dgamma) {
  simt::Cuda ctx;
  kernels::cuda::mix_pair_backward_gamma(ctx, m, dy, dgamma);
}

// Threads of a block that sums `terms` values: whole warps, no more than the terms need.
inline int reduce_threads(int64_t terms) {
  const int64_t warps = (terms + simt::kWarp - 1) / simt::kWarp;
  const int64_t t = (warps > 0 ? warps : 1) * simt::kWarp;
  return static_cast<int>(t < kThreads ? t : kThreads);
}
inline int reduce_blocks(int64_t outputs) { return static_cast<int>(outputs < 65535 ? outputs : 65535); }

}  // namespace detail

// y [B, H, L, C] = l1·γ₁·a (+ l2·γ₂·s).
template <class T>
void mix_pair_forward(const kernels::MixPair<T>& m, T* y) {
  const int64_t n = m.B * m.H * m.L * m.C;
  if (n <= 0) return;
  detail::mix_pair_forward_kernel<<<blocks_for(n), kThreads>>>(m, y);
  check(cudaGetLastError(), "mix_pair_forward kernel launch");
}

// da, ds [B, H, L, C] written; pl1, pl2 [B, ncoef] (zeroed by the caller) += each batch row's
// coefficient gradients, summed over b by the caller; dgamma [B, L, K] accumulated, may be null.
template <class T>
void mix_pair_backward(const kernels::MixPair<T>& m, const T* dy, T* da, T* ds, T* pl1, T* pl2, T* dgamma) {
  const int64_t n = m.B * m.H * m.L * m.C;
  if (n <= 0) return;
  detail::mix_pair_backward_inputs_kernel<<<blocks_for(n), kThreads>>>(m, dy, da, ds);
  check(cudaGetLastError(), "mix_pair_backward inputs kernel launch");

  const int64_t ncoef = kernels::cuda::mix_coefficients(m);
  const int64_t terms = m.per_channel ? m.L : m.head_stride == 1 ? m.L * m.C : m.H * m.L * m.C;
  const int tc = detail::reduce_threads(terms);
  detail::mix_pair_backward_coefficients_kernel<<<detail::reduce_blocks(m.B * ncoef), tc,
                                                  simt::block_sum_shared_bytes<T>(tc)>>>(m, dy, pl1, pl2);
  check(cudaGetLastError(), "mix_pair_backward coefficients kernel launch");

  if (dgamma) {
    const int tg = detail::reduce_threads(m.H * m.C);
    detail::mix_pair_backward_gamma_kernel<<<detail::reduce_blocks(m.B * m.L), tg,
                                             simt::block_sum_shared_bytes<T>(tg)>>>(m, dy, dgamma);
    check(cudaGetLastError(), "mix_pair_backward gamma kernel launch");
  }
}

}  // namespace sinklab::kernels::cuda::host
