// kernels::backend<cuda>: the kernel interface every differentiable op calls (the list is
// kernels/kernel_list.hpp), forwarded to the CUDA backend's host launchers in
// sinklab::kernels::cuda::host, which take the CPU kernels' arguments as device pointers or
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
#include "sinklab/kernels/kernel_list.hpp"

namespace sinklab::kernels {

#define SINKLAB_CUDA_KERNEL(name)                  \
  template <class... A>                            \
  static decltype(auto) name(A&&... a) {           \
    return kernels::cuda::host::name(std::forward<A>(a)...); \
  }
#define SINKLAB_CUDA_KERNEL_OF(name)                          \
  template <class F, class... A>                              \
  static decltype(auto) name(A&&... a) {                      \
    return kernels::cuda::host::name<F>(std::forward<A>(a)...);      \
  }

#define SINKLAB_CUDA_KERNEL_BY_HAND(name)  // the GEMMs, below

template <>
struct backend<sinklab::cuda> {
  SINKLAB_KERNEL_LIST(SINKLAB_CUDA_KERNEL, SINKLAB_CUDA_KERNEL_OF, SINKLAB_CUDA_KERNEL_BY_HAND, SINKLAB_CUDA_KERNEL)

  // GEMM on cuBLAS: the CPU's row-major arguments; bf16 rounds both operands as the CPU does.
  template <class T>
  static void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                   int64_t ldb, T beta, T* C, int64_t ldc) {
    kernels::cuda::host::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  template <class T>
  static void gemm_at(Precision p, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                      int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
    kernels::cuda::host::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, p);
  }
  template <class T>
  static void gemm_batched(Trans ta, Trans tb, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                           int64_t strideA, const T* B, int64_t strideB, T beta, T* C, int64_t strideC) {
    kernels::cuda::host::gemm_batched(ta, tb, batch, M, N, K, alpha, A, ta == Trans::N ? K : M, strideA, B,
                               tb == Trans::N ? N : K, strideB, beta, C, N, strideC);
  }

  template <class T, class Device = sinklab::cuda>
  using AttentionForward = kernels::AttentionForward<T, Device>;
};

#undef SINKLAB_CUDA_KERNEL_BY_HAND
#undef SINKLAB_CUDA_KERNEL_OF
#undef SINKLAB_CUDA_KERNEL

}  // namespace sinklab::kernels
