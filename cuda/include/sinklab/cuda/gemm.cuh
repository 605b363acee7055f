// GEMM on the GPU through cuBLAS, with the CPU backend's row-major interface
// (kernels/cpu/gemm.hpp):
//
//   C = alpha · op(A) · op(B) + beta · C,   op(A) [M, K], op(B) [K, N], C [M, N], all row-major
//
// cuBLAS is column-major, and a row-major matrix is its transpose read column-major, so the call
// computes Cᵀ = op(B)ᵀ · op(A)ᵀ with the operands swapped and the transposes kept. Precision::fp32
// multiplies in float32 (cuBLAS's default math, no TF32). Precision::bf16 is torch.autocast's
// bf16 with a float32 result: both operands are rounded to bf16 (to nearest even, as the CPU's
// bf16 GEMM: kernels/cuda/convert.hpp) into dense scratch, then multiplied on the tensor cores
// with float32 sums. (CUBLAS_COMPUTE_32F_FAST_16BF on the float operands is not that: it only
// allows reduced precision; on an H100 some products came back in float32 and none matched
// operands rounded to nearest bf16.) Batched: `batch` products at fixed element strides between
// operands.
//
// Every call runs on the default stream, as the rest of the backend (memory.cuh says why).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "sinklab/core/error.hpp"
#include "sinklab/cuda/device.cuh"
#include "sinklab/cuda/memory.cuh"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cuda/convert.hpp"

namespace sinklab::kernels::cuda::host {

inline void check(cublasStatus_t s, const char* what) {
  SINKLAB_CHECK(s == CUBLAS_STATUS_SUCCESS, "cuBLAS: ", what, " failed: ", cublasGetStatusString(s));
}

// This thread's cuBLAS handle on the current device, created on first use. Handles are never
// destroyed: a handle destroyed after the CUDA runtime has shut down (static destruction at exit)
// crashes, and one per thread and device is all a process makes.
inline cublasHandle_t cublas() {
  constexpr int kMaxDevices = 64;
  thread_local cublasHandle_t handles[kMaxDevices] = {};
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  SINKLAB_CHECK(dev >= 0 && dev < kMaxDevices, "kernels::cuda::host::cublas: device ", dev, " beyond ", kMaxDevices);
  if (!handles[dev]) check(cublasCreate(&handles[dev]), "cublasCreate");
  return handles[dev];
}

namespace detail {
inline cublasOperation_t op(kernels::Trans t) { return t == kernels::Trans::T ? CUBLAS_OP_T : CUBLAS_OP_N; }
inline int as_int(int64_t v, const char* what) {
  SINKLAB_CHECK(v >= 0 && v <= 2147483647, "kernels::cuda::host::gemm: ", what, " = ", v, " does not fit cuBLAS's int");
  return static_cast<int>(v);
}
inline void check_gemm(kernels::Trans ta, kernels::Trans tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                int64_t ldc) {
  const int64_t a_cols = ta == kernels::Trans::N ? K : M, b_cols = tb == kernels::Trans::N ? N : K;
  SINKLAB_CHECK(M >= 0 && N >= 0 && K >= 0, "kernels::cuda::host::gemm: negative size M ", M, " N ", N, " K ", K);
  SINKLAB_CHECK(lda >= (a_cols > 1 ? a_cols : 1) && ldb >= (b_cols > 1 ? b_cols : 1) && ldc >= (N > 1 ? N : 1),
                "kernels::cuda::host::gemm: leading dimensions lda ", lda, " ldb ", ldb, " ldc ", ldc, " below the rows' ",
                a_cols, ", ", b_cols, ", ", N);
}

template <class F>  // float; a template so that every translation unit may define it
__global__ void to_bf16_kernel(const F* src, int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                               uint16_t* dst) {
  simt::Cuda ctx;
  kernels::cuda::to_bf16_dense(ctx, src, batch, rows, cols, ld, stride, dst);
}
// The stored [rows, cols] matrices of an operand as dense bf16 scratch. The scratch goes back to
// the block cache when the returned pointer dies, which is safe on the backend's one stream.
inline std::shared_ptr<uint16_t[]> bf16_copy(const float* X, int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                                             int64_t stride) {
  const std::size_t n = static_cast<std::size_t>(batch * rows * cols);
  std::shared_ptr<uint16_t[]> out = memory<sinklab::cuda>::allocate<uint16_t>(n);
  to_bf16_kernel<<<blocks_for(n), kThreads>>>(X, batch, rows, cols, ld, stride, out.get());
  check(cudaGetLastError(), "to_bf16_kernel");
  return out;
}
}  // namespace detail

template <class T>
void gemm_batched(kernels::Trans ta, kernels::Trans tb, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha,
                  const T* A, int64_t lda, int64_t strideA, const T* B, int64_t ldb, int64_t strideB, T beta, T* C,
                  int64_t ldc, int64_t strideC, kernels::Precision precision = kernels::Precision::fp32) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "kernels::cuda::host::gemm: float or double");
  detail::check_gemm(ta, tb, M, N, K, lda, ldb, ldc);
  if (batch == 0 || M == 0 || N == 0) return;
  const int m = detail::as_int(N, "N"), n = detail::as_int(M, "M"), k = detail::as_int(K, "K");
  const int lb = detail::as_int(ldb, "ldb"), la = detail::as_int(lda, "lda"), lc = detail::as_int(ldc, "ldc");
  const int count = detail::as_int(batch, "batch");
  cublasHandle_t h = cublas();
  if constexpr (std::is_same_v<T, double>) {
    check(cublasDgemmStridedBatched(h, detail::op(tb), detail::op(ta), m, n, k, &alpha, B, lb, strideB, A, la, strideA,
                                    &beta, C, lc, strideC, count),
          "cublasDgemmStridedBatched");
  } else if (precision == kernels::Precision::bf16 && K > 0) {
    const int64_t a_rows = ta == kernels::Trans::N ? M : K, a_cols = ta == kernels::Trans::N ? K : M;
    const int64_t b_rows = tb == kernels::Trans::N ? K : N, b_cols = tb == kernels::Trans::N ? N : K;
    const auto A16 = detail::bf16_copy(A, batch, a_rows, a_cols, lda, strideA);
    const auto B16 = detail::bf16_copy(B, batch, b_rows, b_cols, ldb, strideB);
    check(cublasGemmStridedBatchedEx(h, detail::op(tb), detail::op(ta), m, n, k, &alpha, B16.get(), CUDA_R_16BF,
                                     detail::as_int(b_cols, "op(B) columns"), b_rows * b_cols, A16.get(), CUDA_R_16BF,
                                     detail::as_int(a_cols, "op(A) columns"), a_rows * a_cols, &beta, C, CUDA_R_32F,
                                     lc, strideC, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx (bf16 operands)");
  } else {
    check(cublasGemmStridedBatchedEx(h, detail::op(tb), detail::op(ta), m, n, k, &alpha, B, CUDA_R_32F, lb, strideB, A,
                                     CUDA_R_32F, la, strideA, &beta, C, CUDA_R_32F, lc, strideC, count,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  }
}

template <class T>
void gemm(kernels::Trans ta, kernels::Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, kernels::Precision precision = kernels::Precision::fp32) {
  gemm_batched(ta, tb, 1, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, precision);
}

}  // namespace sinklab::kernels::cuda::host
