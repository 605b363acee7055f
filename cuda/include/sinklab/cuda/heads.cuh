// Host launchers for the head layouts and RoPE (kernels/cuda/heads.hpp) with kernels::cpu's
// signatures (kernels/cpu/heads.hpp, rope.hpp), on device pointers: a thread per output element,
// the backend's usual grid (memory.cuh's blocks_for, grid-stride beyond it), the default stream.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/cuda/heads.hpp"

namespace sinklab::kernels::cuda::host {

namespace detail {

template <class T>
__global__ void split_heads_kernel(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d,
                                   T* y) {
  simt::Cuda ctx;
  kernels::cuda::split_heads(ctx, x, B, L, N, col0, heads, d, y);
}
template <class T>
__global__ void split_heads_grad_kernel(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0,
                                        int64_t heads, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::split_heads_grad(ctx, g, gx, fresh, B, L, N, col0, heads, d);
}
template <class T>
__global__ void merge_heads_kernel(const T* x, T* y, int64_t B, int64_t H, int64_t L, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::merge_heads(ctx, x, y, B, H, L, d);
}
template <class T>
__global__ void merge_heads_grad_kernel(const T* g, T* gx, bool fresh, int64_t B, int64_t H, int64_t L, int64_t d) {
  simt::Cuda ctx;
  kernels::cuda::merge_heads_grad(ctx, g, gx, fresh, B, H, L, d);
}
template <class T>
__global__ void rope_rotate_kernel(const T* x, T* y, const T* cos, const T* sin, int64_t outer, int64_t tlen, int64_t d,
                                   int64_t offset, T sign) {
  simt::Cuda ctx;
  kernels::cuda::rope_rotate(ctx, x, y, cos, sin, outer, tlen, d, offset, sign);
}
template <class T>
__global__ void rope_gather_kernel(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d,
                                   const T* cos, const T* sin, int64_t offset, T* y) {
  simt::Cuda ctx;
  kernels::cuda::rope_gather(ctx, x, B, L, N, col0, heads, d, cos, sin, offset, y);
}
template <class T>
__global__ void rope_gather_grad_kernel(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0,
                                        int64_t heads, int64_t d, const T* cos, const T* sin, int64_t offset) {
  simt::Cuda ctx;
  kernels::cuda::rope_gather_grad(ctx, g, gx, fresh, B, L, N, col0, heads, d, cos, sin, offset);
}
template <class T>
__global__ void heads_grad_to_projection_kernel(const T* dq, const T* dk, const T* dv, int64_t B, int64_t L, int64_t H,
                                                int64_t Hkv, int64_t d, const T* cos, const T* sin, T* gx) {
  simt::Cuda ctx;
  kernels::cuda::heads_grad_to_projection(ctx, dq, dk, dv, B, L, H, Hkv, d, cos, sin, gx);
}

}  // namespace detail

// Columns [col0, col0 + heads·d) of x [B, L, N] → y [B, heads, L, d].
template <class T>
void split_heads(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d, T* y) {
  const int64_t n = B * heads * L * d;
  if (n <= 0) return;
  detail::split_heads_kernel<<<blocks_for(n), kThreads>>>(x, B, L, N, col0, heads, d, y);
  check(cudaGetLastError(), "split_heads kernel launch");
}
// Its backward: g [B, heads, L, d] into those columns of gx (written when fresh, with the other
// columns zeroed; added otherwise).
template <class T>
void split_heads_grad(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                      int64_t d) {
  const int64_t n = B * L * (fresh ? N : heads * d);
  if (n <= 0) return;
  detail::split_heads_grad_kernel<<<blocks_for(n), kThreads>>>(g, gx, fresh, B, L, N, col0, heads, d);
  check(cudaGetLastError(), "split_heads_grad kernel launch");
}
// x [B, H, T, d] → y [B, T, H·d].
template <class T>
void merge_heads(const T* x, T* y, int64_t B, int64_t H, int64_t L, int64_t d) {
  const int64_t n = B * H * L * d;
  if (n <= 0) return;
  detail::merge_heads_kernel<<<blocks_for(n), kThreads>>>(x, y, B, H, L, d);
  check(cudaGetLastError(), "merge_heads kernel launch");
}
// Its backward: g [B, T, H·d] into gx [B, H, T, d], written when fresh, else added.
template <class T>
void merge_heads_grad(const T* g, T* gx, bool fresh, int64_t B, int64_t H, int64_t L, int64_t d) {
  const int64_t n = B * H * L * d;
  if (n <= 0) return;
  detail::merge_heads_grad_kernel<<<blocks_for(n), kThreads>>>(g, gx, fresh, B, H, L, d);
  check(cudaGetLastError(), "merge_heads_grad kernel launch");
}
// Every row of x [outer, T, d] rotated by the angles of positions offset..offset+T−1 (sign +1)
// or back (sign −1); y must not overlap x.
template <class T>
void rope_rotate(const T* x, T* y, const T* cos, const T* sin, int64_t outer, int64_t tlen, int64_t d, int64_t offset,
                 T sign) {
  const int64_t n = outer * tlen * d;
  if (n <= 0) return;
  detail::rope_rotate_kernel<<<blocks_for(n), kThreads>>>(x, y, cos, sin, outer, tlen, d, offset, sign);
  check(cudaGetLastError(), "rope_rotate kernel launch");
}
// Columns [col0, col0 + heads·d) of x [B, L, N] as heads y [B, heads, L, d] rotated to positions
// offset + t.
template <class T>
void rope_gather(const T* x, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads, int64_t d, const T* cos,
                 const T* sin, int64_t offset, T* y) {
  const int64_t n = B * heads * L * d;
  if (n <= 0) return;
  detail::rope_gather_kernel<<<blocks_for(n), kThreads>>>(x, B, L, N, col0, heads, d, cos, sin, offset, y);
  check(cudaGetLastError(), "rope_gather kernel launch");
}
// The gradient of qkv [B, L, (H + 2·H_kv)·d] from dq [B, H, L, d], dk, dv [B, H_kv, L, d]: dq and
// dk rotated back when cos is given (positions 0..L−1), dv copied; every element written.
template <class T>
void heads_grad_to_projection(const T* dq, const T* dk, const T* dv, int64_t B, int64_t L, int64_t H, int64_t Hkv,
                              int64_t d, const T* cos, const T* sin, T* gx) {
  const int64_t n = B * L * (H + 2 * Hkv) * d;
  if (n <= 0) return;
  detail::heads_grad_to_projection_kernel<<<blocks_for(n), kThreads>>>(dq, dk, dv, B, L, H, Hkv, d, cos, sin, gx);
  check(cudaGetLastError(), "heads_grad_to_projection kernel launch");
}
// The backward of rope_gather: g [B, heads, L, d] rotated back into columns [col0, col0 + heads·d)
// of gx [B, L, N] (written when fresh, other columns zeroed; added otherwise).
template <class T>
void rope_gather_grad(const T* g, T* gx, bool fresh, int64_t B, int64_t L, int64_t N, int64_t col0, int64_t heads,
                      int64_t d, const T* cos, const T* sin, int64_t offset) {
  const int64_t n = B * L * (fresh ? N : heads * d);
  if (n <= 0) return;
  detail::rope_gather_grad_kernel<<<blocks_for(n), kThreads>>>(g, gx, fresh, B, L, N, col0, heads, d, cos, sin, offset);
  check(cudaGetLastError(), "rope_gather_grad kernel launch");
}

}  // namespace sinklab::kernels::cuda::host
