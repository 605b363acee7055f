// Register-blocked products for the small blocks of the fused attention kernels (32×128 tiles,
// head sizes of 16–128), where a general GEMM spends more time packing and dispatching than
// multiplying. No packing: B's rows are read in place as SIMD vectors and A's elements are
// broadcast, with any strides, so A may be read transposed for free.
//
//   C[M×N] = alpha · Σ_k A(i, k) · B[k, :] + beta · C,   A(i, k) = A[i·sai + k·sak]
//
// N must be a multiple of the SIMD width (block_gemm_fits); B rows hold N contiguous values.
#pragma once
#include <cstdint>
#include <type_traits>

#include "sinklab/core/config.hpp"
#include "sinklab/core/xsimd.hpp"
#include "sinklab/kernels/cpu/transpose16.hpp"

namespace sinklab::kernels::cpu {

template <class T>
constexpr int64_t simd_width() {
  return static_cast<int64_t>(xsimd::batch<T>::size);
}

// Whether block_gemm handles N columns.
template <class T>
constexpr bool block_gemm_fits(int64_t N) {
  return N > 0 && N % simd_width<T>() == 0;
}

namespace detail {

// MR rows × NV vectors of C, accumulated in registers over the whole K.
template <int MR, int NV, class T>
inline void block_kernel(int64_t K, T alpha, const T* A, int64_t sai, int64_t sak, const T* B, int64_t ldb, T beta,
                         T* C, int64_t ldc) {
  using V = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(V::size);
  V acc[MR][NV];
  SINKLAB_UNROLL(16)
  for (int r = 0; r < MR; ++r)
    SINKLAB_UNROLL(8)
    for (int v = 0; v < NV; ++v) acc[r][v] = V(T(0));
  for (int64_t k = 0; k < K; ++k) {
    const T* b = B + k * ldb;
    const T* a = A + k * sak;
    V bv[NV];
    SINKLAB_UNROLL(8)
    for (int v = 0; v < NV; ++v) bv[v] = V::load_unaligned(b + v * W);
    SINKLAB_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      const V ar(a[r * sai]);
      SINKLAB_UNROLL(8)
      for (int v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(ar, bv[v], acc[r][v]);
    }
  }
  const V va(alpha), vb(beta);
  SINKLAB_UNROLL(16)
  for (int r = 0; r < MR; ++r)
    SINKLAB_UNROLL(8)
    for (int v = 0; v < NV; ++v) {
      T* c = C + r * ldc + v * W;
      const V out = beta == T(0) ? acc[r][v] * va : xsimd::fma(vb, V::load_unaligned(c), acc[r][v] * va);
      out.store_unaligned(c);
    }
}

template <int NV, class T>
inline void block_rows(int64_t M, int64_t K, T alpha, const T* A, int64_t sai, int64_t sak, const T* B, int64_t ldb,
                       T beta, T* C, int64_t ldc) {
  constexpr int MR = NV >= 3 ? 4 : 8;  // ≤ 16 accumulators, B's vectors and a broadcast fit the registers
  int64_t i = 0;
  for (; i + MR <= M; i += MR)
    block_kernel<MR, NV>(K, alpha, A + i * sai, sai, sak, B, ldb, beta, C + i * ldc, ldc);
  if (M - i >= 4) {
    block_kernel<4, NV>(K, alpha, A + i * sai, sai, sak, B, ldb, beta, C + i * ldc, ldc);
    i += 4;
  }
  if (M - i >= 2) {
    block_kernel<2, NV>(K, alpha, A + i * sai, sai, sak, B, ldb, beta, C + i * ldc, ldc);
    i += 2;
  }
  if (M - i >= 1) block_kernel<1, NV>(K, alpha, A + i * sai, sai, sak, B, ldb, beta, C + i * ldc, ldc);
}

}  // namespace detail

template <class T>
void block_gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t sai, int64_t sak, const T* B,
                int64_t ldb, T beta, T* C, int64_t ldc) {
  constexpr int64_t W = simd_width<T>();
  for (int64_t n0 = 0; n0 < N; n0 += 4 * W) {
    const int64_t nv = std::min<int64_t>(4, (N - n0) / W);
    const T* b = B + n0;
    T* c = C + n0;
    switch (nv) {
      case 4: detail::block_rows<4>(M, K, alpha, A, sai, sak, b, ldb, beta, c, ldc); break;
      case 3: detail::block_rows<3>(M, K, alpha, A, sai, sak, b, ldb, beta, c, ldc); break;
      case 2: detail::block_rows<2>(M, K, alpha, A, sai, sak, b, ldb, beta, c, ldc); break;
      default: detail::block_rows<1>(M, K, alpha, A, sai, sak, b, ldb, beta, c, ldc); break;
    }
  }
}

namespace detail {

#if defined(__AVX512F__) && defined(SINKLAB_CPUID)
// The 16 × 16 floats at src (rows lds apart) transposed into dst (rows ld apart), in registers.
inline void transpose16(const float* src, int64_t lds, float* dst, int64_t ld) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  transpose16x16(r);
  for (int k = 0; k < 16; ++k) _mm512_storeu_ps(dst + k * ld, r[k]);
}
#endif

}  // namespace detail

// dst[c·ld + j] = src[j·lds + c] for j < n, c < d (n rows of d values, lds apart, become n columns).
// The attention backward transposes every kv head's keys and values this way; element by
// element, each row's d stores land on d different lines, four times slower than in-register
// 16 × 16 tiles (float with AVX-512; the edges and other types element-wise).
template <class T>
void transpose_rows(const T* src, int64_t lds, int64_t n, int64_t d, T* dst, int64_t ld) {
  int64_t n16 = 0, d16 = 0;
#if defined(__AVX512F__) && defined(SINKLAB_CPUID)
  if constexpr (std::is_same_v<T, float>) {
    n16 = n / 16 * 16, d16 = d / 16 * 16;
    for (int64_t j0 = 0; j0 < n16; j0 += 16)
      for (int64_t c0 = 0; c0 < d16; c0 += 16) detail::transpose16(src + j0 * lds + c0, lds, dst + c0 * ld + j0, ld);
  }
#endif
  for (int64_t j = 0; j < n; ++j) {
    const T* in = src + j * lds;
    for (int64_t c = j < n16 ? d16 : 0; c < d; ++c) dst[c * ld + j] = in[c];
  }
}

}  // namespace sinklab::kernels::cpu
