// kernels::backend<cuda>: the kernel interface every differentiable op calls (the list is
// kernels/cpu/backend.hpp's), forwarded to the CUDA backend's host launchers in
// sinklab::cuda_backend, which take the CPU kernels' arguments as device pointers or
// Tensor<T, cuda>. With this header (and memory.cuh, which it includes) a Tape<T, cuda> runs
// every op of autodiff/ on the GPU: include it from a .cu file built by nvcc.
//
// Every kernel runs on the default stream, in the order the ops issue them; the launchers return
// without waiting, except those that return a host value (sum_all, sum_of_squares(_over), first_non_finite,
// cross_entropy_count and cross_entropy_forward, an embedding's id check), which copy it back, and an attention with
// kv_lengths (on the host), which copies them over.
#pragma once
#include <utility>

#include "sinklab/cuda/attention_ops.cuh"
#include "sinklab/cuda/elementwise.cuh"
#include "sinklab/cuda/gemm.cuh"
#include "sinklab/cuda/glu.cuh"
#include "sinklab/cuda/heads.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/cuda/mix.cuh"
#include "sinklab/cuda/norm.cuh"
#include "sinklab/cuda/rowwise.cuh"
#include "sinklab/cuda/update.cuh"
#include "sinklab/kernels/backend.hpp"

namespace sinklab::kernels {

#define SINKLAB_CUDA_KERNEL(name)                  \
  template <class... A>                            \
  static decltype(auto) name(A&&... a) {           \
    return cuda_backend::name(std::forward<A>(a)...); \
  }
#define SINKLAB_CUDA_KERNEL_OF(name)                          \
  template <class F, class... A>                              \
  static decltype(auto) name(A&&... a) {                      \
    return cuda_backend::name<F>(std::forward<A>(a)...);      \
  }

template <>
struct backend<sinklab::cuda> {
  // elementwise
  SINKLAB_CUDA_KERNEL_OF(unary)
  SINKLAB_CUDA_KERNEL_OF(unary_grad)
  SINKLAB_CUDA_KERNEL(binary)
  SINKLAB_CUDA_KERNEL(binary_scalar)
  SINKLAB_CUDA_KERNEL(add_inplace)
  SINKLAB_CUDA_KERNEL(pow_forward)
  SINKLAB_CUDA_KERNEL(pow_backward)
  SINKLAB_CUDA_KERNEL(broadcast_binary)
  SINKLAB_CUDA_KERNEL(sum_to)
  SINKLAB_CUDA_KERNEL(add_into)
  SINKLAB_CUDA_KERNEL(embedding_forward)
  SINKLAB_CUDA_KERNEL(embedding_backward)
  SINKLAB_CUDA_KERNEL(repeat)
  SINKLAB_CUDA_KERNEL(repeat_backward)
  // reductions
  SINKLAB_CUDA_KERNEL(sum_axis)
  SINKLAB_CUDA_KERNEL(broadcast_axis_add)
  SINKLAB_CUDA_KERNEL(max_axis)
  SINKLAB_CUDA_KERNEL(max_axis_backward)
  SINKLAB_CUDA_KERNEL(sum_all)
  SINKLAB_CUDA_KERNEL(sum_of_squares)
  SINKLAB_CUDA_KERNEL(sum_of_squares_over)
  SINKLAB_CUDA_KERNEL(first_non_finite)
  // rows
  SINKLAB_CUDA_KERNEL(softmax_rows)
  SINKLAB_CUDA_KERNEL(softmax_rows_backward)
  SINKLAB_CUDA_KERNEL(log_softmax_rows)
  SINKLAB_CUDA_KERNEL(log_softmax_rows_backward)
  SINKLAB_CUDA_KERNEL(cross_entropy_count)
  SINKLAB_CUDA_KERNEL(cross_entropy_forward)
  SINKLAB_CUDA_KERNEL(cross_entropy_backward)
  // GEMM on cuBLAS: the CPU's row-major arguments; bf16 rounds both operands as the CPU does.
  template <class T>
  static void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                   int64_t ldb, T beta, T* C, int64_t ldc) {
    cuda_backend::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  template <class T>
  static void gemm_at(Precision p, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                      int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
    cuda_backend::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, p);
  }
  template <class T>
  static void gemm_batched(Trans ta, Trans tb, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                           int64_t strideA, const T* B, int64_t strideB, T beta, T* C, int64_t strideC) {
    cuda_backend::gemm_batched(ta, tb, batch, M, N, K, alpha, A, ta == Trans::N ? K : M, strideA, B,
                               tb == Trans::N ? N : K, strideB, beta, C, N, strideC);
  }
  SINKLAB_CUDA_KERNEL_OF(act_mul_forward)
  SINKLAB_CUDA_KERNEL_OF(act_mul_backward)
  SINKLAB_CUDA_KERNEL_OF(glu_up)
  SINKLAB_CUDA_KERNEL_OF(glu_hidden_grad)
  // norms
  SINKLAB_CUDA_KERNEL(rms_forward)
  SINKLAB_CUDA_KERNEL(rms_backward)
  SINKLAB_CUDA_KERNEL(layer_norm_forward)
  SINKLAB_CUDA_KERNEL(layer_norm_backward)
  SINKLAB_CUDA_KERNEL(dyt_forward)
  SINKLAB_CUDA_KERNEL(dyt_backward)
  // anchor mixing
  SINKLAB_CUDA_KERNEL(mix_pair_forward)
  SINKLAB_CUDA_KERNEL(mix_pair_backward)
  // heads and RoPE
  SINKLAB_CUDA_KERNEL(split_heads)
  SINKLAB_CUDA_KERNEL(split_heads_grad)
  SINKLAB_CUDA_KERNEL(merge_heads)
  SINKLAB_CUDA_KERNEL(merge_heads_grad)
  SINKLAB_CUDA_KERNEL(rope_rotate)
  SINKLAB_CUDA_KERNEL(rope_gather)
  SINKLAB_CUDA_KERNEL(rope_gather_grad)
  SINKLAB_CUDA_KERNEL(heads_grad_to_projection)
  // attention
  SINKLAB_CUDA_KERNEL(attention_fused_forward)
  SINKLAB_CUDA_KERNEL(attention_fused_backward)
  SINKLAB_CUDA_KERNEL(attention_reference_forward)
  SINKLAB_CUDA_KERNEL(attention_reference_backward)
  SINKLAB_CUDA_KERNEL(value_transform_forward)
  SINKLAB_CUDA_KERNEL(value_transform_backward)
  SINKLAB_CUDA_KERNEL(gate_forward)
  SINKLAB_CUDA_KERNEL(gate_backward)
  SINKLAB_CUDA_KERNEL(row_norms)
  SINKLAB_CUDA_KERNEL(gate_values)
  // in-place updates: optimiser steps, gradient clipping
  SINKLAB_CUDA_KERNEL(apply_update)

  template <class T, class Device = sinklab::cuda>
  using AttentionForward = kernels::cpu::AttentionForward<T, Device>;
};

#undef SINKLAB_CUDA_KERNEL_OF
#undef SINKLAB_CUDA_KERNEL

}  // namespace sinklab::kernels
