// Single-threaded GEMM with a register-blocked xsimd micro-kernel, for the shapes of transformer
// training (a few thousand token rows times weights of 128–2048 columns, in all three of
// x·W, g·Wᵀ and xᵀ·g). It beats Eigen's general kernel on these shapes by keeping a 6×4-vector
// tile of C in registers (24 accumulators; 4 loads and 6 broadcasts per 24 FMAs).
//
//   C = alpha · op(A) · op(B) + beta · C,  row-major, op(X) = X or Xᵀ
//
// Blocking: for each slice of KC rows of op(B), B is packed once into column panels of NR =
// 256 bytes of columns (4 AVX-512 vectors; zero-padded, so the kernel never needs a column
// tail), each panel kc × NR, small enough for L1. A tile compiled for narrower vectors takes a
// panel in strips of 4 of its vectors; a program compiled for less than its CPU runs the CPU's
// own fp32 tiles instead (gemm_tile_x86.hpp), on the same panels. The kernel then reads op(A) in place — A(i, k) at A[i·sai + k·sak], so a
// transposed A costs nothing — broadcasting one element per row and k.
//
// A row epilogue ep(r0, r1) is called once for each block of rows of C as soon as those rows are
// final, while they are still in cache: an element-wise consumer of the product (an activation,
// a residual add) then costs no extra pass over memory.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "sinklab/core/config.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/storage.hpp"
#include "sinklab/core/xsimd.hpp"
#include "sinklab/kernels/cpu/gemm_tile_x86.hpp"

namespace sinklab::kernels::cpu {

// ep(r0, r1) is told that rows [r0, r1) of C (r0 < r1) are final; a default-constructed one is
// no epilogue.
using RowEpilogue = std::function<void(int64_t r0, int64_t r1)>;

namespace detail {

template <class T>
struct PackedGemm {
  using V = xsimd::batch<T>;
  static constexpr int64_t W = static_cast<int64_t>(V::size);
  static constexpr int64_t NV = 4;
  static constexpr int64_t NS = NV * W;  // columns of the compiled tile (a strip of a panel)
  static constexpr int64_t NR = 256 / static_cast<int64_t>(sizeof(T));  // columns per panel
  static_assert(NR % NS == 0, "a panel holds whole strips of the compiled tile");
  static constexpr int64_t MR = 6;       // rows per micro-tile
  static constexpr int64_t KC = 128;     // depth of a packed slice (a panel is KC·NR·sizeof(T) ≤ 32 KiB)
  static constexpr int64_t CBytes = 512 * 1024;  // budget for a block of C kept in L2 across K slices

  // Rows [0, R) × a strip of NS columns (rows NR apart in the panel): acc = Σ_k A(i, k)·Bp[k, :];
  // then C = alpha·acc + beta·C on the first `ncols` columns (beta == 0: C is not read).
  template <int R>
  static void tile(int64_t kc, const T* A, int64_t sai, int64_t sak, const T* Bp, T alpha, T beta, T* C, int64_t ldc,
                   int64_t ncols) {
    // C's lines are fetched while the tile computes: a product's output is usually cold (a fresh
    // buffer, or one written megabytes ago), and the stores at the end would otherwise wait on memory.
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < ncols; j += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(C + r * ldc + j, 1, 3);
    V acc[R][NV];
    SINKLAB_UNROLL(8)
    for (int r = 0; r < R; ++r)
      SINKLAB_UNROLL(4)
      for (int v = 0; v < NV; ++v) acc[r][v] = V(T(0));
    for (int64_t k = 0; k < kc; ++k) {
      const T* b = Bp + k * NR;
      const V b0 = V::load_aligned(b), b1 = V::load_aligned(b + W), b2 = V::load_aligned(b + 2 * W),
              b3 = V::load_aligned(b + 3 * W);
      const T* a = A + k * sak;
      // A transposed (a weight gradient xᵀ·g) puts each k on a new line of x, a stride the
      // hardware prefetcher does not follow; its lines come from memory, so fetch 16 k ahead
      // (the address is formed as an integer: it may lie past the end of A, which a prefetch
      // does not mind but pointer arithmetic would).
      if (sai == 1)
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(a) +
                                                         static_cast<std::uintptr_t>(16 * sak) * sizeof(T)),
                           0, 3);
      SINKLAB_UNROLL(8)
      for (int r = 0; r < R; ++r) {
        const V ar(a[r * sai]);
        acc[r][0] = xsimd::fma(ar, b0, acc[r][0]);
        acc[r][1] = xsimd::fma(ar, b1, acc[r][1]);
        acc[r][2] = xsimd::fma(ar, b2, acc[r][2]);
        acc[r][3] = xsimd::fma(ar, b3, acc[r][3]);
      }
    }
    const V va(alpha), vb(beta);
    if (ncols == NS) {
      SINKLAB_UNROLL(8)
      for (int r = 0; r < R; ++r)
        SINKLAB_UNROLL(4)
        for (int v = 0; v < NV; ++v) {
          T* c = C + r * ldc + v * W;
          const V out = beta == T(0) ? acc[r][v] * va : xsimd::fma(vb, V::load_unaligned(c), acc[r][v] * va);
          out.store_unaligned(c);
        }
    } else {
      alignas(64) T buf[NS];
      for (int r = 0; r < R; ++r) {
        for (int v = 0; v < NV; ++v) (acc[r][v] * va).store_aligned(buf + v * W);
        T* c = C + r * ldc;
        if (beta == T(0))
          for (int64_t j = 0; j < ncols; ++j) c[j] = buf[j];
        else
          for (int64_t j = 0; j < ncols; ++j) c[j] = beta * c[j] + buf[j];
      }
    }
  }

  // Rows [0, R) × a whole panel (its first ncols columns), on the tile gemm_tile() names.
  template <int R>
  static void panel_tile(GemmTile kind, int64_t kc, const T* A, int64_t sai, int64_t sak, const T* Bp, T alpha, T beta,
                         T* C, int64_t ldc, int64_t ncols) {
#if defined(SINKLAB_CPUID)
    if constexpr (std::is_same_v<T, float>) {
      if (kind == GemmTile::Avx512) {
        x86::tile_f32_avx512<R>(kc, A, sai, sak, Bp, NR, alpha, beta, C, ldc, ncols);
        return;
      }
      if (kind == GemmTile::Avx2) {
        for (int64_t s = 0; s < ncols; s += 16)
          x86::tile_f32_avx2<R>(kc, A, sai, sak, Bp + s, NR, alpha, beta, C + s, ldc, std::min<int64_t>(16, ncols - s));
        return;
      }
    }
#endif
    (void)kind;
    for (int64_t s = 0; s < ncols; s += NS)
      tile<R>(kc, A, sai, sak, Bp + s, alpha, beta, C + s, ldc, std::min(NS, ncols - s));
  }

  // All M rows against one packed panel.
  static void rows(int64_t M, int64_t kc, const T* A, int64_t sai, int64_t sak, const T* Bp, T alpha, T beta, T* C,
                   int64_t ldc, int64_t ncols) {
    const GemmTile kind = std::is_same_v<T, float> ? gemm_tile() : GemmTile::Compiled;
    int64_t i = 0;
    for (; i + MR <= M; i += MR) panel_tile<MR>(kind, kc, A + i * sai, sai, sak, Bp, alpha, beta, C + i * ldc, ldc, ncols);
    const int64_t rest = M - i;
    const T* a = A + i * sai;
    T* c = C + i * ldc;
    switch (rest) {
      case 5: panel_tile<5>(kind, kc, a, sai, sak, Bp, alpha, beta, c, ldc, ncols); break;
      case 4: panel_tile<4>(kind, kc, a, sai, sak, Bp, alpha, beta, c, ldc, ncols); break;
      case 3: panel_tile<3>(kind, kc, a, sai, sak, Bp, alpha, beta, c, ldc, ncols); break;
      case 2: panel_tile<2>(kind, kc, a, sai, sak, Bp, alpha, beta, c, ldc, ncols); break;
      case 1: panel_tile<1>(kind, kc, a, sai, sak, Bp, alpha, beta, c, ldc, ncols); break;
      default: break;
    }
  }

  // One K slice: C[:, 0 : n) (+)= A[:, slice]·Bp for np = ⌈n/NR⌉ packed panels [kc, NR] laid out
  // one after the other, the rows in blocks that keep their slice of A in L2 while every panel
  // passes over them. After the last slice of the last columns, `ep` (if any) gets each finished
  // block, its rows offset by `row0`.
  static void slice(int64_t M, int64_t n, int64_t kc, const T* A, int64_t sai, int64_t sak, const T* Bp, T alpha,
                    T beta, T* C, int64_t ldc, const RowEpilogue* ep = nullptr, int64_t row0 = 0) {
    constexpr int64_t MC = 16 * MR;
    const int64_t np = (n + NR - 1) / NR;
    for (int64_t i0 = 0; i0 < M; i0 += MC) {
      const int64_t mc = std::min(MC, M - i0);
      for (int64_t p = 0; p < np; ++p)
        rows(mc, kc, A + i0 * sai, sai, sak, Bp + p * kc * NR, alpha, beta, C + i0 * ldc + p * NR, ldc,
             std::min(NR, n - p * NR));
      if (ep) (*ep)(row0 + i0, row0 + i0 + mc);
    }
  }

  // Packs op(B)[k0 : k0 + kc, n0 : n0 + nc] into Bp [kc, NR], zero-padding columns nc..NR−1.
  static void pack(bool trans_b, const T* B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nc, T* Bp) {
    if (!trans_b) {  // op(B)[k, n] = B[k·ldb + n]
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = B + (k0 + k) * ldb + n0;
        T* dst = Bp + k * NR;
        simd::copy(src, dst, nc);
        for (int64_t j = nc; j < NR; ++j) dst[j] = T(0);
      }
    } else {  // op(B)[k, n] = B[n·ldb + k]: read rows of B, write columns of the panel
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = nc; j < NR; ++j) Bp[k * NR + j] = T(0);
      for (int64_t j = 0; j < nc; ++j) {
        const T* src = B + (n0 + j) * ldb + k0;
        for (int64_t k = 0; k < kc; ++k) Bp[k * NR + j] = src[k];
      }
    }
  }

  // All of op(B) packed for threads that share it: slice s (rows k0 = s·KC of op(B)) starts at
  // Bp + k0·panels·NR and holds its panels one after the other, each [kc, NR].
  static int64_t packed_size(int64_t K, int64_t N) { return K * ((N + NR - 1) / NR) * NR; }
  static void pack_panel(bool trans_b, const T* B, int64_t ldb, int64_t K, int64_t N, int64_t slice, int64_t panel,
                         T* Bp) {
    const int64_t panels = (N + NR - 1) / NR, k0 = slice * KC, kc = std::min(KC, K - k0), n0 = panel * NR;
    pack(trans_b, B, ldb, k0, kc, n0, std::min(NR, N - n0), Bp + k0 * panels * NR + panel * kc * NR);
  }
  // Columns [n0, n0 + n) of C (n0 a multiple of NR) against a whole packed op(B) of N columns.
  // `ep` (offset by row0) only when these are all of C's columns.
  static void run_packed(bool trans_a, int64_t M, int64_t n, int64_t K, int64_t N, int64_t n0, T alpha, const T* A,
                         int64_t lda, const T* Bp, T beta, T* C, int64_t ldc, const RowEpilogue* ep = nullptr,
                         int64_t row0 = 0) {
    const int64_t sai = trans_a ? 1 : lda, sak = trans_a ? lda : 1;
    const int64_t panels = (N + NR - 1) / NR, p0 = n0 / NR;
    // With several K slices, rows go in blocks whose C stays in L2 over all of them, so C makes
    // one trip through memory instead of one per slice (a 2048 × 1376 output of K = 256 is
    // 11 MiB, written, then read and written again); op(B), packed once, is reread for each
    // block instead, so blocks keep at least 4 micro-tiles of rows.
    const int64_t mc =
        K <= KC ? M
                : std::clamp<int64_t>(CBytes / 2 / (std::max<int64_t>(n, 1) * static_cast<int64_t>(sizeof(T))) / MR * MR,
                                      4 * MR, 16 * MR);
    for (int64_t i0 = 0; i0 < M; i0 += mc) {
      const int64_t m = std::min(mc, M - i0);
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = std::min(KC, K - k0);
        slice(m, n, kc, A + i0 * sai + k0 * sak, sai, sak, Bp + k0 * panels * NR + p0 * kc * NR, alpha,
              k0 == 0 ? beta : T(1), C + i0 * ldc, ldc, k0 + KC >= K ? ep : nullptr, row0 + i0);
      }
    }
  }

  static void run(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                  const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const RowEpilogue* ep = nullptr) {
    const int64_t sai = trans_a ? 1 : lda, sak = trans_a ? lda : 1;
    const int64_t panels = (N + NR - 1) / NR;
    const int64_t kc_max = std::min(KC, K);
    // C is read and written once per K slice. With many slices and few rows (a weight gradient:
    // long K, C of a few MiB) its columns are taken in blocks whose M rows stay in L2 (CBytes)
    // over all slices, instead of streaming C through L3 K/KC times; each block rereads A, so
    // only when A's slice is small.
    const bool block_columns = K >= 4 * KC && M * KC * static_cast<int64_t>(sizeof(T)) <= CBytes / 2;
    const int64_t block_panels =
        block_columns ? std::clamp<int64_t>(CBytes / (M * NR * static_cast<int64_t>(sizeof(T))), 1, panels) : panels;
    // One packed slice of a column block of op(B): [kc, NR] per panel, 64-byte aligned, recycled by the pool.
    std::shared_ptr<T[]> packed = allocate_host<T>(static_cast<std::size_t>(block_panels * kc_max * NR));
    T* Bp = packed.get();
    for (int64_t p0 = 0; p0 < panels; p0 += block_panels) {
      const int64_t np = std::min(block_panels, panels - p0);
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = std::min(KC, K - k0);
        for (int64_t p = 0; p < np; ++p) {
          const int64_t n0 = (p0 + p) * NR;
          pack(trans_b, B, ldb, k0, kc, n0, std::min(NR, N - n0), Bp + p * kc * NR);
        }
        slice(M, std::min(np * NR, N - p0 * NR), kc, A + k0 * sak, sai, sak, Bp, alpha, k0 == 0 ? beta : T(1),
              C + p0 * NR, ldc, k0 + KC >= K && p0 + np == panels ? ep : nullptr);
      }
    }
  }
};

}  // namespace detail

// C = alpha · op(A) · op(B) + beta · C on the calling thread, then ep on every row block.
template <class T>
void gemm_packed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const RowEpilogue& ep = {}) {
  if (M <= 0) return;
  if (N <= 0 || K <= 0) {  // an empty sum: C = beta·C (C is not read when beta is 0)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    if (ep) ep(0, M);
    return;
  }
  detail::PackedGemm<T>::run(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep ? &ep : nullptr);
}

}  // namespace sinklab::kernels::cpu
