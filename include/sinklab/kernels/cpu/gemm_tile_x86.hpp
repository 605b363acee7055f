// fp32 GEMM micro-tiles for a program compiled for less than its CPU. The packed GEMM
// (gemm_packed.hpp) is written over xsimd batches, whose width is fixed when the program is
// compiled: a project that links sinklab with the compiler's default flags gets SSE2 tiles (4
// floats per instruction, 30 GFLOP/s on one Zen 4 core where AVX-512 tiles run 105). These tiles
// carry function-level target attributes, so they exist in such a program too, and the packed
// GEMM calls the widest one the CPU runs when it is wider than the compiled one:
//
//   AVX-512F   6 × 64 tile of C: 24 zmm accumulators, a panel row in 4 loads
//   AVX2+FMA   6 × 16 tile: 12 ymm accumulators (16 registers in all; 6 × 32 would spill)
//
// They read the panels the xsimd tile reads (rows of 64 floats, gemm_packed.hpp) and sum over k in
// the same order. xsimd's own dispatch needs one translation unit per ISA, which a header-only
// library cannot ship; the tiles are hand-written for that reason.
#pragma once
#include <atomic>
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/xsimd.hpp"

#if defined(SINKLAB_CPUID)
#include <immintrin.h>
#endif

namespace sinklab::kernels::cpu {

// Which fp32 tile the packed GEMM runs: Auto is the widest of the compiled xsimd tile and the
// CPU's run-time tiles; the others are for tests and benchmarks (set_gemm_tile).
enum class GemmTile { Auto, Compiled, Avx2, Avx512 };

inline const char* gemm_tile_name(GemmTile t) {
  switch (t) {
    case GemmTile::Avx512: return "avx512f (run time)";
    case GemmTile::Avx2: return "avx2+fma (run time)";
    default: return "compiled";
  }
}

namespace detail {
inline std::atomic<GemmTile>& gemm_tile_request() {
  static std::atomic<GemmTile> t{GemmTile::Auto};
  return t;
}
}  // namespace detail

// Process-wide choice of the fp32 tile (Auto by default). A tile the CPU lacks is refused.
inline void set_gemm_tile(GemmTile t) {
  const CpuFeatures& f = cpu_features();
  SINKLAB_CHECK(t != GemmTile::Avx512 || f.avx512f, "kernels::cpu::set_gemm_tile: this CPU (", f.summary(),
                ") has no AVX-512F");
  SINKLAB_CHECK(t != GemmTile::Avx2 || (f.avx2 && f.fma), "kernels::cpu::set_gemm_tile: this CPU (", f.summary(),
                ") has no AVX2 and FMA");
  detail::gemm_tile_request().store(t, std::memory_order_relaxed);
}

// The fp32 tile the packed GEMM runs now (never Auto).
inline GemmTile gemm_tile() {
  const GemmTile asked = detail::gemm_tile_request().load(std::memory_order_relaxed);
  if (asked != GemmTile::Auto) return asked;
  static const GemmTile best = [] {
    constexpr int64_t compiled = static_cast<int64_t>(xsimd::batch<float>::size);
    const CpuFeatures& f = cpu_features();
#if defined(SINKLAB_CPUID)
    if (compiled < 16 && f.avx512f) return GemmTile::Avx512;
    if (compiled < 8 && f.avx2 && f.fma) return GemmTile::Avx2;
#endif
    (void)f;
    return GemmTile::Compiled;
  }();
  return best;
}

#if defined(SINKLAB_CPUID)
namespace detail::x86 {

#define SINKLAB_TARGET_AVX512F __attribute__((target("avx512f")))
#define SINKLAB_TARGET_AVX2FMA __attribute__((target("avx2,fma")))

// Rows [0, R) × 64 columns of a panel (rows ldp floats apart, 64-byte aligned): acc = Σ_k
// A(r, k)·Bp[k, :], then C = alpha·acc + beta·C on the first ncols columns (beta 0: C unread).
template <int R>
SINKLAB_TARGET_AVX512F void tile_f32_avx512(int64_t kc, const float* A, int64_t sai, int64_t sak, const float* Bp,
                                            int64_t ldp, float alpha, float beta, float* C, int64_t ldc, int64_t ncols) {
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < ncols; j += 16) __builtin_prefetch(C + r * ldc + j, 1, 3);
  __m512 acc[R][4];
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const float* b = Bp + k * ldp;
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16), b2 = _mm512_load_ps(b + 32),
                 b3 = _mm512_load_ps(b + 48);
    const float* a = A + k * sak;
    if (sai == 1)  // a transposed A: see the xsimd tile
      __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(a) +
                                                       static_cast<std::uintptr_t>(16 * sak) * sizeof(float)),
                         0, 3);
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * sai]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(ar, b2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(ar, b3, acc[r][3]);
    }
  }
  // Constant indices into acc only (unrolled loops, the column bound tested inside): an index GCC
  // cannot resolve keeps the whole array in memory, stored on every k.
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r)
    SINKLAB_UNROLL(4)
    for (int v = 0; v < 4; ++v) {
      if (16 * v >= ncols) continue;
      const int64_t left = ncols - 16 * v;
      const __mmask16 keep = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      float* c = C + r * ldc + 16 * v;
      const __m512 scaled = _mm512_mul_ps(acc[r][v], va);
      const __m512 out = beta == 0.f ? scaled : _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(keep, c), scaled);
      _mm512_mask_storeu_ps(c, keep, out);
    }
}

// Rows [0, R) × 16 columns (two ymm vectors) of a panel, as tile_f32_avx512.
template <int R>
SINKLAB_TARGET_AVX2FMA void tile_f32_avx2(int64_t kc, const float* A, int64_t sai, int64_t sak, const float* Bp,
                                          int64_t ldp, float alpha, float beta, float* C, int64_t ldc, int64_t ncols) {
  __m256 acc[R][2];
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const float* b = Bp + k * ldp;
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    const float* a = A + k * sak;
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * sai);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  alignas(32) float buf[16];
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    if (ncols == 16) {
      SINKLAB_UNROLL(2)
      for (int v = 0; v < 2; ++v) {
        const __m256 scaled = _mm256_mul_ps(acc[r][v], va);
        _mm256_storeu_ps(c + 8 * v, beta == 0.f ? scaled : _mm256_fmadd_ps(vb, _mm256_loadu_ps(c + 8 * v), scaled));
      }
      continue;
    }
    _mm256_store_ps(buf, _mm256_mul_ps(acc[r][0], va));
    _mm256_store_ps(buf + 8, _mm256_mul_ps(acc[r][1], va));
    for (int64_t j = 0; j < ncols; ++j) c[j] = beta == 0.f ? buf[j] : beta * c[j] + buf[j];
  }
}

#undef SINKLAB_TARGET_AVX512F
#undef SINKLAB_TARGET_AVX2FMA

}  // namespace detail::x86
#endif

}  // namespace sinklab::kernels::cpu
