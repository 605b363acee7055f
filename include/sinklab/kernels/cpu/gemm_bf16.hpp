// bf16 GEMM with fp32 accumulation — the product torch.autocast runs on a CPU:
//
//   C = alpha · op(A) · op(B) + beta · C,   A, B, C fp32 in memory, row-major, op(X) = X or Xᵀ,
//
// the operands rounded to bf16 (round to nearest even) as they are packed, multiplied exactly
// (a product of two bf16 fits an fp32) and summed in fp32; alpha, beta and C stay fp32.
//
// Paths, chosen once per process (cpu_features()):
//  - AMX-BF16: tdpbf16ps, 16 pairs of k into a 16 × 16 fp32 tile per instruction. The same packed
//    operands as AVX512-BF16, padded to whole tiles (A: rows to 32, pairs to 16; B: pairs to 16):
//    a 16-row slice of A is a tile read with the row stride, a 16-column slice of a B panel one
//    read with the panel's 256-byte stride. The loop and a software model of the tile unit are
//    in amx.hpp. Not yet run on AMX hardware (the project's machine has none): it is tested
//    through the model and, before Auto takes it, checked against AVX512-BF16 once per process
//    (bf16_amx_available()).
//  - AVX512-BF16: vdpbf16ps, two k per 32-bit lane. op(A) is packed into bf16 pairs, one 32-bit
//    word per row and pair of k, broadcast to a register; op(B) into VNNI panels of NR = 64
//    columns, each pair of k one 256-byte row [b(2p, j), b(2p+1, j)] for j < 64. A 6 × 4-vector
//    tile of C lives in registers, as in the fp32 kernel (gemm_packed.hpp).
//  - elsewhere, the same numbers emulated: the operands rounded to bf16 and multiplied by the
//    fp32 kernel (the sums are fp32 on both paths; they differ only in rounding order).
// The row epilogue (gemm_packed.hpp) runs on each block of rows of C once it is final.
//
// Hand-written because no library on this platform's list has a bf16 GEMM: Eigen's bfloat16
// products compute in fp32 after converting, and xsimd has no bf16 batch.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "sinklab/core/bf16.hpp"
#include "sinklab/core/config.hpp"
#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/storage.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/amx.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/transpose16.hpp"

namespace sinklab::kernels::cpu {

// Amx: tdpbf16ps tiles (on gemm_bf16's tile unit); Avx512Bf16: vdpbf16ps; Emulated: fp32 products
// of rounded operands.
enum class Bf16Path { Auto, Amx, Avx512Bf16, Emulated };

inline bool bf16_native_available() { return cpu_features().avx512_bf16; }

namespace detail::bf16 {

constexpr int64_t MR = 6, NV = 4, W = 16, NR = NV * W;
constexpr int64_t KC = 256;  // k per packed slice (even): a panel slice is KC·NR·2 B = 32 KiB

// op(X)(r, k) of a row-major X: X[r·ld + k], or X[k·ld + r] when transposed.
inline float at(const float* X, int64_t ld, bool trans, int64_t r, int64_t k) {
  return trans ? X[k * ld + r] : X[r * ld + k];
}

#if defined(SINKLAB_CPUID)
#define SINKLAB_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

// The packing of the native path converts 32 floats per instruction (vcvtne2ps2bf16: round to
// nearest even, as to_bf16, except that fp32 denormals, |x| < 1.2e-38, become ±0 where to_bf16
// keeps them as bf16 denormals); edges not a whole vector wide are packed one element at a time,
// except a transposed A's last rows (masked loads) and a transposed B's last columns (zero
// vectors). At N = 1024 the scalar packing took a fifth of the product.

// 32 consecutive floats → 32 bf16 in order.
SINKLAB_TARGET_BF16 inline __m512i bf16x32(const float* x) {
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}
// 16 floats of each of two rows → 16 bf16 pairs (x0[j], x1[j]), one 32-bit word per j; the lanes
// j not in `live` are not read and give zero words.
SINKLAB_TARGET_BF16 inline __m512i bf16_pairs16(const float* x0, const float* x1, __mmask16 live = 0xFFFF) {
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(live, x1),
                                                    _mm512_maskz_loadu_ps(live, x0));  // x0 low, x1 high
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                              21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, both);
}

// pack_b, 16 columns or 32 k at a time, into a panel of `pair_rows` ≥ ⌈kc/2⌉ rows. What the
// values do not fill is zeroed first, and only that: the rows from the last whole pair on (an odd
// kc's last pair has a zero second half; AMX reads the panel 16 rows at a time) and the columns
// past nc (never stored, but zeros keep their lanes finite).
SINKLAB_TARGET_BF16 inline void pack_b_native(bool tb, const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0,
                                              int64_t nc, uint16_t* Bp, int64_t pair_rows) {
  std::memset(Bp + kc / 2 * NR * 2, 0, static_cast<std::size_t>((pair_rows - kc / 2) * NR * 2) * sizeof(uint16_t));
  if (nc < NR)
    for (int64_t p = 0; p < kc / 2; ++p)
      std::memset(Bp + p * NR * 2 + 2 * nc, 0, static_cast<std::size_t>((NR - nc) * 2) * sizeof(uint16_t));
  if (!tb) {  // op(B)[k, j] = B[k·ldb + j]: two rows of B give 16 pairs per vector
    const int64_t n16 = nc / 16 * 16;
    for (int64_t p = 0; p < kc / 2; ++p) {
      const float* r0 = B + (k0 + 2 * p) * ldb + n0;
      for (int64_t j = 0; j < n16; j += 16)
        _mm512_storeu_si512(Bp + p * NR * 2 + 2 * j, bf16_pairs16(r0 + j, r0 + ldb + j));
    }
    for (int64_t k = 0; k < kc; ++k) {  // the columns past n16, and an odd last k
      uint16_t* row = Bp + (k / 2) * NR * 2 + (k & 1);
      for (int64_t j = (k < kc / 2 * 2 ? n16 : 0); j < nc; ++j) row[2 * j] = to_bf16(B[(k0 + k) * ldb + n0 + j]);
    }
    return;
  }
  // op(B)[k, j] = B[j·ldb + k]: a row of B is a column of op(B), its pairs already adjacent: 32 k
  // of 16 columns are 16 vectors of pair words, transposed in registers into 16 pair rows of the
  // panel (stored a word at a time, they cost a tenth of g·Wᵀ at 2048 × 256 × 1376).
  // Past nc the vectors are zeros: they fill the panel's zero columns (NR is a multiple of 16).
  const int64_t k32 = kc / 32 * 32;
  auto* Bw = reinterpret_cast<uint32_t*>(Bp);  // one word per pair and column: Bw[p·NR + j]
  for (int64_t j0 = 0; j0 < nc; j0 += 16)
    for (int64_t k = 0; k < k32; k += 32) {
      __m512 w[16];
      for (int c = 0; c < 16; ++c)
        w[c] = j0 + c < nc ? _mm512_castsi512_ps(bf16x32(B + (n0 + j0 + c) * ldb + k0 + k)) : _mm512_setzero_ps();
      transpose16x16(w);
      for (int t = 0; t < 16; ++t) _mm512_storeu_si512(Bw + (k / 2 + t) * NR + j0, _mm512_castps_si512(w[t]));
    }
  for (int64_t j = 0; j < nc; ++j)  // every column's k past k32
    for (int64_t k = k32; k < kc; ++k) Bp[(k / 2) * NR * 2 + 2 * j + (k & 1)] = to_bf16(B[(n0 + j) * ldb + k0 + k]);
}

// pack_a, 32 k or 16 rows at a time, rows `ld` ≥ ⌈kc/2⌉ words apart (the words past the pairs are
// zeros: AMX reads 16 pairs at a time).
SINKLAB_TARGET_BF16 inline void pack_a_native(bool ta, const float* A, int64_t lda, int64_t i0, int64_t m, int64_t k0,
                                              int64_t kc, uint32_t* Ap, int64_t ld) {
  const int64_t kp = (kc + 1) / 2;
  if (ld > kp)
    for (int64_t i = 0; i < m; ++i) std::fill(Ap + i * ld + kp, Ap + (i + 1) * ld, 0u);
  if (!ta) {  // a row of op(A) is a row of A: its pairs are adjacent
    const int64_t k32 = kc / 32 * 32;
    for (int64_t i = 0; i < m; ++i) {
      const float* src = A + (i0 + i) * lda + k0;
      uint32_t* dst = Ap + i * ld;
      for (int64_t k = 0; k < k32; k += 32) _mm512_storeu_si512(dst + k / 2, bf16x32(src + k));
      for (int64_t k = k32; k < kc; k += 2) {
        const uint32_t lo = to_bf16(src[k]), hi = k + 1 < kc ? to_bf16(src[k + 1]) : 0u;
        dst[k / 2] = lo | (hi << 16);
      }
    }
    return;
  }
  // op(A)[i, k] = A[k·lda + i]: two rows of A give the pairs of 16 rows of op(A), one vector of
  // words per pair; 16 pairs × 16 rows of words are transposed in registers into rows of Ap
  // (storing the words one by one cost as much as the product in the attention's Pᵀ·dO). A last
  // group of fewer than 16 rows reads masked (one element at a time it took a tenth of xᵀ·g).
  const int64_t p16 = kc / 2 / 16 * 16;
  alignas(64) uint32_t words[16];
  for (int64_t i = 0; i < m; i += 16) {
    const int64_t rows = std::min<int64_t>(16, m - i);
    const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
    for (int64_t p0 = 0; p0 < p16; p0 += 16) {
      __m512 w[16];
      for (int t = 0; t < 16; ++t) {
        const float* r0 = A + (k0 + 2 * (p0 + t)) * lda + i0 + i;
        w[t] = _mm512_castsi512_ps(bf16_pairs16(r0, r0 + lda, live));
      }
      transpose16x16(w);
      for (int r = 0; r < rows; ++r) _mm512_storeu_si512(Ap + (i + r) * ld + p0, _mm512_castps_si512(w[r]));
    }
    for (int64_t p = p16; p < kc / 2; ++p) {
      const float* r0 = A + (k0 + 2 * p) * lda + i0 + i;
      _mm512_store_si512(words, bf16_pairs16(r0, r0 + lda, live));
      for (int64_t t = 0; t < rows; ++t) Ap[(i + t) * ld + p] = words[t];
    }
  }
  if (kc % 2)  // an odd last k: its pair's second half is zero
    for (int64_t i = 0; i < m; ++i) Ap[i * ld + kc / 2] = to_bf16(A[(k0 + kc - 1) * lda + i0 + i]);
}

// C[0, left) = alpha·acc + beta·C for one vector of a row of C (beta == 0: C is not read).
SINKLAB_TARGET_BF16 inline void store_row16(float* c, __m512 acc, float alpha, float beta, int64_t left) {
  const __mmask16 m = left >= W ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
  __m512 out = _mm512_mul_ps(acc, _mm512_set1_ps(alpha));
  if (beta != 0.0f) out = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, c), out);
  _mm512_mask_storeu_ps(c, m, out);
}

// Rows [0, R) of C against the first V vectors of one panel: acc = Σ_p A-pair · B-pair, then
// C = alpha·acc + beta·C on the first ncols ≤ V·16 columns (beta == 0: C is not read). V = 2
// serves panels of at most 32 columns (an edge, or the attention's 32-query blocks) at half the work.
template <int R, int V>
SINKLAB_TARGET_BF16 void tile(int64_t kp, const uint32_t* Ap, int64_t lda, const uint16_t* Bp, float alpha, float beta,
                              float* C, int64_t ldc, int64_t ncols) {
  __m512 acc[R][V];
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r)
    SINKLAB_UNROLL(4)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const uint16_t* b = Bp + p * NR * 2;
    __m512bh bv[V];
    SINKLAB_UNROLL(4)
    for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 2 * W * v);
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(Ap[r * lda + p]));
      SINKLAB_UNROLL(4)
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, bv[v]);
    }
  }
  SINKLAB_UNROLL(8)
  for (int r = 0; r < R; ++r)
    SINKLAB_UNROLL(4)
    for (int v = 0; v < V; ++v) {
      const int64_t left = ncols - v * W;
      if (left <= 0) break;
      store_row16(C + r * ldc + v * W, acc[r][v], alpha, beta, left);
    }
}

// m rows of packed A (kp pairs each, rows lda words apart) against one panel, MR rows at a time.
template <int V>
SINKLAB_TARGET_BF16 inline void rows_of_panel(int64_t m, int64_t kp, const uint32_t* Ap, int64_t lda,
                                              const uint16_t* panel, float alpha, float beta, float* c, int64_t ldc,
                                              int64_t ncols) {
  int64_t i = 0;
  for (; i + MR <= m; i += MR) tile<MR, V>(kp, Ap + i * lda, lda, panel, alpha, beta, c + i * ldc, ldc, ncols);
  const uint32_t* a = Ap + i * lda;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5: tile<5, V>(kp, a, lda, panel, alpha, beta, ci, ldc, ncols); break;
    case 4: tile<4, V>(kp, a, lda, panel, alpha, beta, ci, ldc, ncols); break;
    case 3: tile<3, V>(kp, a, lda, panel, alpha, beta, ci, ldc, ncols); break;
    case 2: tile<2, V>(kp, a, lda, panel, alpha, beta, ci, ldc, ncols); break;
    case 1: tile<1, V>(kp, a, lda, panel, alpha, beta, ci, ldc, ncols); break;
    default: break;
  }
}

// m rows of packed A (kp pairs each, rows lda words apart) against the panels of one K slice
// (`pair_rows` ≥ kp rows each: the first kp are read).
SINKLAB_TARGET_BF16 inline void block(int64_t m, int64_t n, int64_t kp, const uint32_t* Ap, int64_t lda,
                                      const uint16_t* Bp, int64_t pair_rows, float alpha, float beta, float* C,
                                      int64_t ldc) {
  for (int64_t p = 0; p < (n + NR - 1) / NR; ++p) {
    const uint16_t* panel = Bp + p * pair_rows * NR * 2;
    const int64_t ncols = std::min(NR, n - p * NR);
    if (ncols > 2 * W)
      rows_of_panel<NV>(m, kp, Ap, lda, panel, alpha, beta, C + p * NR, ldc, ncols);
    else
      rows_of_panel<2>(m, kp, Ap, lda, panel, alpha, beta, C + p * NR, ldc, ncols);
  }
}

// The AMX path: m rows of packed A (rows `ld` words apart, zero rows up to a multiple of 32,
// pairs zero-padded to a multiple of 16) against the first `pair_rows` (a multiple of 16) rows of
// the panels of one K slice (`panel_rows` ≥ pair_rows rows each), 32 rows × 32 columns per
// product_32x32 (amx.hpp); the sums leave through a 32 × 32 scratch to the same row store as the
// AVX-512 tile.
template <class Tiles>
SINKLAB_TARGET_BF16 void block_amx(Tiles& t, int64_t m, int64_t n, int64_t pair_rows, int64_t ld, const uint32_t* Ap,
                                   const uint16_t* Bp, int64_t panel_rows, float alpha, float beta, float* C,
                                   int64_t ldc) {
  const amx::TileScope<Tiles> scope(t);  // released before the caller's epilogue, which may multiply
  alignas(64) float acc[32 * 32];
  const auto* a = reinterpret_cast<const unsigned char*>(Ap);
  for (int64_t p = 0; p < (n + NR - 1) / NR; ++p) {
    const auto* panel = reinterpret_cast<const unsigned char*>(Bp + p * panel_rows * NR * 2);
    const int64_t ncols = std::min(NR, n - p * NR);
    for (int64_t i = 0; i < m; i += 32)
      for (int64_t h = 0; h < ncols; h += 32) {  // a pair-row of the panel is NR·4 bytes
        amx::product_32x32<false>(t, pair_rows / 16, a + i * ld * 4, ld * 4, panel + h * 4, NR * 4, 16 * 4, acc);
        for (int64_t r = 0; r < std::min<int64_t>(32, m - i); ++r)
          for (int64_t v = 0; v < 2 && h + v * W < ncols; ++v)
            store_row16(C + (i + r) * ldc + p * NR + h + v * W, _mm512_load_ps(acc + r * 32 + v * W), alpha, beta,
                        ncols - h - v * W);
      }
  }
}
#undef SINKLAB_TARGET_BF16

// The whole product: op(B) packed once (in parallel, shared), then tiles of rows claimed by the
// threads, each packing its own rows of op(A) per K slice. Tiles = void runs the AVX512-BF16
// tile; an AMX tile unit (amx.hpp) runs block_amx, on operands padded as it reads them.
template <class Tiles = void>
void gemm_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const RowEpilogue& ep) {
  constexpr bool amx = !std::is_void_v<Tiles>;
  const int64_t slices = (K + KC - 1) / KC, panels = (N + NR - 1) / NR;
  auto slice_k = [&](int64_t s) { return std::min(KC, K - s * KC); };
  auto pair_rows = [&](int64_t kc) { return amx ? amx::round_up((kc + 1) / 2, 16) : (kc + 1) / 2; };
  const int64_t ld_max = pair_rows(std::min(KC, K));
  // Slice s starts at s·(KC/2)·panels·NR·2 elements (the last one may be shorter).
  const int64_t slice_stride = (KC / 2) * panels * NR * 2;
  std::shared_ptr<uint16_t[]> packed = allocate_host<uint16_t>(static_cast<std::size_t>(slices * slice_stride));
  parallel_for(0, slices * panels, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t s = j / panels, p = j % panels, kc = slice_k(s), rows = pair_rows(kc);
      pack_b_native(tb, B, ldb, s * KC, kc, p * NR, std::min(NR, N - p * NR),
                    packed.get() + s * slice_stride + p * rows * NR * 2, rows);
    }
  });
  // The tiles shrink (row_tiles.hpp, as gemm's): equal ones, 4 per thread, cost 2 threads
  // ~8% on the decoder's products. Each is taken in blocks of at most `rows` whose packed A stays
  // in L2 over all panels.
  const int threads = in_parallel_region() ? 1 : num_threads();
  const int64_t unit = amx ? 32 : MR, rows = 32 * MR;  // rows: a multiple of both units
  const RowTiles tiles_of_c(M, threads, unit);
  const int64_t* starts = tiles_of_c.starts;
  parallel_for(0, tiles_of_c.count, 1, [&](int64_t t0, int64_t t1) {
    std::shared_ptr<uint32_t[]> Ap = allocate_host<uint32_t>(static_cast<std::size_t>(rows * ld_max));
    [[maybe_unused]] std::conditional_t<amx, Tiles, char> tiles{};
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t i0 = starts[t]; i0 < starts[t + 1]; i0 += rows) {
        const int64_t m = std::min(rows, starts[t + 1] - i0);
        for (int64_t s = 0; s < slices; ++s) {
          const int64_t kc = slice_k(s), ld = pair_rows(kc);
          const float beta_s = s == 0 ? beta : 1.0f;
          pack_a_native(ta, A, lda, i0, m, s * KC, kc, Ap.get(), ld);
          if constexpr (amx) {
            std::fill(Ap.get() + m * ld, Ap.get() + amx::round_up(m, 32) * ld, 0u);  // whole 16-row tiles
            block_amx(tiles, m, N, ld, ld, Ap.get(), packed.get() + s * slice_stride, ld, alpha, beta_s, C + i0 * ldc,
                      ldc);
          } else {
            block(m, N, ld, Ap.get(), ld, packed.get() + s * slice_stride, ld, alpha, beta_s, C + i0 * ldc, ldc);
          }
        }
        if (ep) ep(i0, i0 + m);
      }
  });
}

// Whether the AMX path agrees with the AVX512-BF16 path on a product with edges in every
// dimension, within the sum of both paths' fp32 accumulation bounds; says why on stderr if not.
inline bool amx_self_check() {
  const int64_t M = 45, N = 83, K = 300;
  std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 201) / 50.0f - 2.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 157) / 40.0f - 1.9f;
  std::vector<float> amx_c(static_cast<std::size_t>(M * N)), avx_c(amx_c.size());
  gemm_native<amx::HardwareTiles>(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, amx_c.data(), N, {});
  gemm_native<>(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, avx_c.data(), N, {});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double mag = 0;
      for (int64_t k = 0; k < K; ++k)
        mag += std::abs(double(round_bf16(a[i * K + k])) * double(round_bf16(b[k * N + j])));
      const double x = amx_c[i * N + j], y = avx_c[i * N + j];
      if (!(std::abs(x - y) <= 2.0 * double(K + 2) * std::ldexp(1.0, -24) * mag)) {
        std::fprintf(stderr,
                     "sinklab: the AMX bf16 GEMM gave %.9g where the AVX512-BF16 path gives %.9g (element %lld, %lld "
                     "of a %lld x %lld x %lld self-check); bf16 products use AVX512-BF16 in this process. Please "
                     "report this with the CPU's model.\n",
                     x, y, static_cast<long long>(i), static_cast<long long>(j), static_cast<long long>(M),
                     static_cast<long long>(N), static_cast<long long>(K));
        return false;
      }
    }
  return true;
}
#endif

// The same numbers without the instructions: operands rounded to bf16, then the fp32 GEMM.
inline void gemm_emulated(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                          const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const RowEpilogue& ep) {
  std::shared_ptr<float[]> a = allocate_host<float>(static_cast<std::size_t>(M * K));
  std::shared_ptr<float[]> b = allocate_host<float>(static_cast<std::size_t>(K * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a[i * K + k] = round_bf16(at(A, lda, ta, i, k));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b[k * N + j] = round_bf16(at(B, ldb, tb, k, j));
  gemm(Trans::N, Trans::N, M, N, K, alpha, a.get(), K, b.get(), N, beta, C, ldc, ep);
}

}  // namespace detail::bf16

// Whether Auto takes AMX (amx_usable, once per process; its packing is AVX512-BF16 code).
inline bool bf16_amx_available() {
#if defined(SINKLAB_CPUID)
  static const bool ok =
      amx_usable(cpu_features().amx_bf16 && bf16_native_available(), [] { return detail::bf16::amx_self_check(); });
  return ok;
#else
  return false;
#endif
}

namespace detail::bf16 {
// The path to run for a requested one: Auto takes AMX, else AVX512-BF16, else the emulation; a
// forced path the CPU lacks is an error naming `kernel` (the AMX paths pack with AVX512-BF16 too).
template <class Tiles>
Bf16Path resolve(const char* kernel, Bf16Path path) {
  if (path == Bf16Path::Auto)
    return bf16_amx_available() ? Bf16Path::Amx : bf16_native_available() ? Bf16Path::Avx512Bf16 : Bf16Path::Emulated;
  if (path == Bf16Path::Emulated) return path;
  SINKLAB_CHECK(bf16_native_available(), kernel, ": the ", path == Bf16Path::Avx512Bf16 ? "AVX512-BF16" : "AMX",
                " path was asked for, but this CPU (", cpu_features().summary(), ") does not have AVX512-BF16");
  if constexpr (std::is_same_v<Tiles, amx::HardwareTiles>)
    SINKLAB_CHECK(path != Bf16Path::Amx || (cpu_features().amx_bf16 && cpu_features().amx_permitted), kernel,
                  ": the AMX path was asked for, but this CPU and OS (", cpu_features().summary(),
                  ") do not offer AMX-BF16");
  return path;
}
}  // namespace detail::bf16

// C = alpha · op(A) · op(B) + beta · C with bf16 operands and fp32 accumulation (see the top of
// this file). `path` forces a path for tests; Auto takes AMX, else AVX512-BF16, where present.
// The AMX path runs on `Tiles`: the hardware, or amx::EmulatedTiles for tests on a CPU without
// AMX (instantiated only where named, so programs do not compile the model).
template <class Tiles = detail::amx::HardwareTiles>
void gemm_bf16(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const RowEpilogue& ep = {},
               Bf16Path path = Bf16Path::Auto) {
  if (M <= 0) return;
  if (N <= 0 || K <= 0) {
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);  // an empty sum: C = beta·C
    return;
  }
  path = detail::bf16::resolve<Tiles>("gemm_bf16", path);
  if (path == Bf16Path::Emulated) {
    detail::bf16::gemm_emulated(ta == Trans::T, tb == Trans::T, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    return;
  }
#if defined(SINKLAB_CPUID)
  const bool t1 = ta == Trans::T, t2 = tb == Trans::T;
  if (path == Bf16Path::Amx)
    detail::bf16::gemm_native<Tiles>(t1, t2, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
  else
    detail::bf16::gemm_native<>(t1, t2, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
#endif
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp), for every program that
// multiplies in bf16 (the projections, the attention's general-shape products).
SINKLAB_EXTERN_TEMPLATE(void gemm_bf16<detail::amx::HardwareTiles>(Trans, Trans, int64_t, int64_t, int64_t, float,
                                                                   const float*, int64_t, const float*, int64_t, float,
                                                                   float*, int64_t, const RowEpilogue&, Bf16Path))

// gemm (fp32, or T's own type) or gemm_bf16, by precision: what the differentiable ops call.
template <class T>
void gemm_at(Precision p, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
             const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const RowEpilogue& ep = {}) {
  if constexpr (std::is_same_v<T, float>) {
    if (p == Precision::bf16) {
      gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
      return;
    }
  }
  gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}

}  // namespace sinklab::kernels::cpu
