// GEMM on row-major buffers through Eigen maps; sinklab threads it (independent panels on its
// thread pool), so Eigen's own OpenMP threading is switched off.
//   C = alpha · op(A) · op(B) + beta · C,  op(X) = X or Xᵀ
#pragma once
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "sinklab/core/cpu_features.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/gemm_packed.hpp"
#include "sinklab/kernels/cpu/row_tiles.hpp"

namespace sinklab::kernels::cpu {

using kernels::Trans;

namespace detail {
// For translation units that included Eigen before this header (with OpenMP on): a pool
// thread is outside any OpenMP region, so Eigen would otherwise start a team of its own.
inline const bool eigen_single_threaded = [] {
  Eigen::setNbThreads(1);
  return true;
}();

template <class T>
void gemm_serial(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                 int64_t ldb, T beta, T* C, int64_t ldc, const RowEpilogue& ep = {}) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, Eigen::Unaligned, Eigen::OuterStride<>>;
  using MMap = Eigen::Map<Mat, Eigen::Unaligned, Eigen::OuterStride<>>;
  MMap c(C, M, N, Eigen::OuterStride<>(ldc));
  if (K == 0) {
    if (beta == T(0)) c.setZero();
    else c *= beta;
    if (ep && M > 0) ep(0, M);
    return;
  }
  // Products of some size take the register-blocked kernel (gemm_packed.hpp), which writes C
  // without zero-filling it first (against Eigen's: docs/results/train-step.md, "What made the
  // difference"). Tiny ones stay with Eigen, whose setup costs less.
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= 32.0 * 32 * 32 && M >= 4) {
      gemm_packed(ta == Trans::T, tb == Trans::T, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
      return;
    }
  }
  // Stored shapes: A is M×K (or K×M when transposed), B is K×N (or N×K).
  CMap a(A, ta == Trans::N ? M : K, ta == Trans::N ? K : M, Eigen::OuterStride<>(lda));
  CMap b(B, tb == Trans::N ? K : N, tb == Trans::N ? N : K, Eigen::OuterStride<>(ldb));
  auto run = [&](const auto& x, const auto& y) {
    if (beta == T(0)) {
      c.noalias() = alpha * (x * y);
    } else {
      if (beta != T(1)) c *= beta;
      c.noalias() += alpha * (x * y);
    }
  };
  if (ta == Trans::N && tb == Trans::N) run(a, b);
  else if (ta == Trans::N) run(a, b.transpose());
  else if (tb == Trans::N) run(a.transpose(), b);
  else run(a.transpose(), b.transpose());
  if (ep && M > 0) ep(0, M);
}

// Weight gradients xᵀ·g have few rows and columns and a long K (the tokens). Tiles of C would
// each repack their columns of B over the whole K, so such products are split along K instead:
// each of `parts` slices computes a partial product of all of C (slice 0 into C with beta, the
// others into scratch) and the partials are added row by row, in slice order. A preempted thread
// delays the product by one slice at most: the other threads claim the remaining slices.
//
// The slices depend on K only, never on the thread count, so the sum is the same on any number
// of threads: slices of at least kSplitKSlice, at most kSplitKParts of them (each partial beyond
// the first costs M·N of scratch traffic; 4 keep 2 and 4 threads busy).
inline constexpr int64_t kSplitKSlice = 256, kSplitKParts = 4;
inline int64_t split_k_parts(int64_t K) { return std::clamp<int64_t>(K / kSplitKSlice, 1, kSplitKParts); }

template <class T>
void gemm_split_k(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                  int64_t ldb, T beta, T* C, int64_t ldc, int64_t parts, const RowEpilogue& ep) {
  const int64_t step = (K + parts - 1) / parts;
  parts = (K + step - 1) / step;
  std::shared_ptr<T[]> scratch = allocate_host<T>(static_cast<std::size_t>((parts - 1) * M * N));
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t k0 = p * step, kn = std::min(step, K - k0);
      const T* a = ta == Trans::N ? A + k0 : A + k0 * lda;
      const T* b = tb == Trans::N ? B + k0 * ldb : B + k0;
      if (p == 0) gemm_serial(ta, tb, M, N, kn, alpha, a, lda, b, ldb, beta, C, ldc);
      else gemm_serial(ta, tb, M, N, kn, alpha, a, lda, b, ldb, T(0), scratch.get() + (p - 1) * M * N, N);
    }
  });
  parallel_for(0, M, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t p = 1; p < parts; ++p)
      for (int64_t i = r0; i < r1; ++i) {
        T* c = C + i * ldc;
        const T* s = scratch.get() + ((p - 1) * M + i) * N;
        for (int64_t j = 0; j < N; ++j) c[j] += s[j];
      }
    if (ep) ep(r0, r1);
  });
}
}  // namespace detail

// Threads split C into a grid of tiles, each an independent single-threaded product, claimed
// dynamically (a preempted thread holds up the others for one tile at most). Eigen's own
// threading shares the packing of A and spin-waits for the other threads, which collapses when
// another process holds a core; tiles never wait for each other. The grid has about 4 tiles per
// thread: rows are split first (the row tiles share one packing of op(B)), then columns in whole
// packed panels. Products whose K is the longest side and at least twice M (weight gradients: K
// is the tokens) are split along K instead (gemm_split_k).
//
// A row epilogue ep(r0, r1) (gemm_packed.hpp) is called, possibly on several threads at once, for
// disjoint blocks of rows covering [0, M), each as soon as its rows of C are final; with one, C
// is split by rows only.
template <class T>
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc, const RowEpilogue& ep = {}) {
  // Every model multiplies here first: the place to tell a program built for less than its CPU.
  [[maybe_unused]] static const bool isa_told = warn_if_built_below_cpu();
  const int threads = num_threads();
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (flops < 2.0 * 64 * 64 * 64) {
    detail::gemm_serial(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    return;
  }
  // Decided by the shape alone, on any number of threads (one included), so a product gives
  // the same bits whatever runs it: the tiled paths below sum every element's K in the same
  // order as the serial kernel; split K fixes its slices by K (detail::split_k_parts).
  if (K >= 2 * M && K >= N && K >= 2 * detail::kSplitKSlice) {
    detail::gemm_split_k(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, detail::split_k_parts(K), ep);
    return;
  }
  if (threads <= 1 || in_parallel_region()) {
    detail::gemm_serial(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    return;
  }
  constexpr int64_t kRowAlign = 6, kMinRows = 60, kColAlign = 64;  // the packed micro-kernel's MR and NR
  const int64_t want = std::min<int64_t>(4 * int64_t{threads}, detail::kMaxRowTiles);
  const int64_t row_tiles = std::clamp<int64_t>(M / kMinRows, 1, want);
  if (ep && row_tiles < threads) {  // too few rows to split by rows only: tile freely, then run ep
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    parallel_for(0, M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)), ep);
    return;
  }
  const int64_t col_tiles =
      ep ? 1 : std::clamp<int64_t>((want + row_tiles - 1) / row_tiles, 1, (N + kColAlign - 1) / kColAlign);
  const int64_t rows = ((M + row_tiles - 1) / row_tiles + kRowAlign - 1) / kRowAlign * kRowAlign;
  const int64_t cols = ((N + col_tiles - 1) / col_tiles + kColAlign - 1) / kColAlign * kColAlign;
  const int64_t mt = (M + rows - 1) / rows, nt = (N + cols - 1) / cols;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // Several row tiles would each pack the same columns of B: pack op(B) once, in parallel, and
    // share it (the transposing pack of g·Wᵀ cost as much as a fifth of the product).
    using Packed = detail::PackedGemm<T>;
    const int64_t size = Packed::packed_size(K, N);
    if (mt > 1 && size * static_cast<int64_t>(sizeof(T)) <= (int64_t{16} << 20)) {
      std::shared_ptr<T[]> packed = allocate_host<T>(static_cast<std::size_t>(size));
      const int64_t slices = (K + Packed::KC - 1) / Packed::KC, panels = (N + Packed::NR - 1) / Packed::NR;
      parallel_for(0, slices * panels, 1, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j)
          Packed::pack_panel(tb == Trans::T, B, ldb, K, N, j / panels, j % panels, packed.get());
      });
      int64_t starts[detail::kMaxRowTiles + 1];  // mt ≤ row tiles ≤ want ≤ kMaxRowTiles
      if (nt == 1) detail::shrinking_tiles(M, mt, kRowAlign, starts);
      parallel_for(0, mt * nt, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t i0 = nt == 1 ? starts[t] : (t / nt) * rows, j0 = (t % nt) * cols;
          const int64_t m = nt == 1 ? starts[t + 1] - i0 : std::min(rows, M - i0), n = std::min(cols, N - j0);
          if (m <= 0) continue;
          const T* a = ta == Trans::N ? A + i0 * lda : A + i0;
          Packed::run_packed(ta == Trans::T, m, n, K, N, j0, alpha, a, lda, packed.get(), beta, C + i0 * ldc + j0, ldc,
                             ep ? &ep : nullptr, i0);
        }
      });
      return;
    }
  }
  parallel_for(0, mt * nt, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = (t / nt) * rows, j0 = (t % nt) * cols;
      const int64_t m = std::min(rows, M - i0), n = std::min(cols, N - j0);
      const T* a = ta == Trans::N ? A + i0 * lda : A + i0;
      const T* b = tb == Trans::N ? B + j0 : B + j0 * ldb;
      RowEpilogue tile_ep;  // nt == 1 here when ep is set: the tile's rows are whole rows of C
      if (ep) tile_ep = [&ep, i0](int64_t r0, int64_t r1) { ep(i0 + r0, i0 + r1); };
      detail::gemm_serial(ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, C + i0 * ldc + j0, ldc, tile_ep);
    }
  });
}

// Batched GEMM over contiguous row-major matrices: batch i uses A + i·strideA etc. A stride of
// 0 broadcasts one matrix over the batch (e.g. a weight). Many small products run in parallel
// over the batch; a single large one is split into panels by gemm().
template <class T>
void gemm_batched(Trans ta, Trans tb, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t strideA, const T* B, int64_t strideB, T beta, T* C, int64_t strideC) {
  const int64_t lda = ta == Trans::N ? K : M;
  const int64_t ldb = tb == Trans::N ? N : K;
  if (batch == 1) {
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    return;
  }
  parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      gemm(ta, tb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta, C + b * strideC, N);
  });
}

}  // namespace sinklab::kernels::cpu
