// The CPU GEMMs (Eigen path, register-blocked packed kernel, attention block products) against a
// naive triple loop, and the thread pool behind parallel_for; the fused attention's
// block-product path against the materialised reference in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/kernels/cpu/block_gemm.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"
#include "sinklab/kernels/cpu/row_tiles.hpp"

using namespace sinklab;
using namespace sinklab::kernels::cpu;

namespace {

template <class T>
std::vector<T> random_vector(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<T>(rng.uniform() * 2 - 1);
  return v;
}

// C = alpha·op(A)·op(B) + beta·C in double.
template <class T>
std::vector<double> naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const std::vector<T>& A,
                          int64_t lda, const std::vector<T>& B, int64_t ldb, double beta, const std::vector<T>& C,
                          int64_t ldc) {
  std::vector<double> out(C.begin(), C.end()), row(static_cast<std::size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {  // k outside j: B's rows are read in order
      const double a = static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]);
      for (int64_t j = 0; j < N; ++j) row[j] += a * static_cast<double>(tb ? B[j * ldb + k] : B[k * ldb + j]);
    }
    for (int64_t j = 0; j < N; ++j)
      out[i * ldc + j] = alpha * row[j] + (beta == 0 ? 0.0 : beta * static_cast<double>(C[i * ldc + j]));
  }
  return out;
}

// With `epilogue`, the product also runs a row epilogue that copies each row block it is given:
// every row must be handed over exactly once, and only when final (the copy equals the result).
template <class T>
void check_gemm(int64_t M, int64_t N, int64_t K, bool ta, bool tb, T alpha, T beta, bool packed_only,
                bool epilogue = false) {
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;  // padded strides
  const auto A = random_vector<T>((ta ? K : M) * lda, 1 + M);
  const auto B = random_vector<T>((tb ? N : K) * ldb, 2 + N);
  auto C = random_vector<T>(M * ldc, 3 + K);
  if (beta == T(0))
    for (int64_t i = 0; i < M; ++i) C[i * ldc] = std::numeric_limits<T>::quiet_NaN();  // must not be read
  const auto want = naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  auto got = C;
  std::vector<T> copied(got.size(), T(0));
  std::vector<std::atomic<int>> handed(static_cast<std::size_t>(M));
  RowEpilogue ep;
  if (epilogue)
    ep = [&](int64_t r0, int64_t r1) {
      REQUIRE((0 <= r0 && r0 < r1 && r1 <= M));
      for (int64_t i = r0; i < r1; ++i) {
        handed[static_cast<std::size_t>(i)].fetch_add(1);
        for (int64_t j = 0; j < N; ++j) copied[i * ldc + j] = got[i * ldc + j];
      }
    };
  if (packed_only)
    gemm_packed(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, got.data(), ldc, ep);
  else
    gemm(ta ? Trans::T : Trans::N, tb ? Trans::T : Trans::N, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta,
         got.data(), ldc, ep);
  if (epilogue) {
    int wrong_count = 0;
    bool copies_equal = true;
    for (int64_t i = 0; i < M; ++i) {
      wrong_count += handed[static_cast<std::size_t>(i)].load() != 1;
      for (int64_t j = 0; j < N; ++j) copies_equal = copies_equal && copied[i * ldc + j] == got[i * ldc + j];
    }
    CHECK_MESSAGE(wrong_count == 0, "M=", M, " N=", N, " K=", K, ": ", wrong_count, " rows not handed over exactly once");
    CHECK_MESSAGE(copies_equal, "M=", M, " N=", N, " K=", K, ": a row was handed over before it was final (or never)");
  }
  const double tol = std::is_same_v<T, float> ? 1e-4 * std::sqrt(static_cast<double>(K)) : 1e-11;
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) worst = std::max(worst, std::abs(static_cast<double>(got[i * ldc + j]) - want[i * ldc + j]));
  CHECK_MESSAGE(worst < tol, "M=", M, " N=", N, " K=", K, " ta=", ta, " tb=", tb, " beta=", beta, " worst ", worst);
  // Columns past N (the stride padding) are untouched.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = N; j < ldc; ++j)
      if (!(i * ldc + j >= static_cast<int64_t>(C.size()))) REQUIRE(got[i * ldc + j] == C[i * ldc + j]);
}

}  // namespace

TEST_CASE_TEMPLATE("gemm: packed kernel and threaded gemm equal a naive product for every transpose", T, float, double) {
  const int64_t sizes[][3] = {{1, 1, 1},   {5, 7, 3},    {6, 64, 128}, {13, 65, 129}, {37, 200, 300},
                              {300, 33, 17}, {128, 688, 260}, {7, 130, 1},
                              {40, 70, 1100}};  // long K, small C: split along K on 2 threads
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& s : sizes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (T beta : {T(0), T(1), T(0.5)}) {
            check_gemm<T>(s[0], s[1], s[2], ta, tb, T(0.75), beta, true);
            check_gemm<T>(s[0], s[1], s[2], ta, tb, T(1.25), beta, false);
          }
  }
  set_num_threads(2);
}

TEST_CASE("gemm: every fp32 tile the CPU runs (compiled, AVX2, AVX-512 at run time) equals a naive product") {
  const CpuFeatures& f = cpu_features();
  std::vector<GemmTile> tiles{GemmTile::Compiled};
  if (f.avx2 && f.fma) tiles.push_back(GemmTile::Avx2);
  if (f.avx512f) tiles.push_back(GemmTile::Avx512);
  if (tiles.size() < 3) MESSAGE("this CPU (" << f.summary() << ") runs " << tiles.size() << " of the 3 fp32 tiles; the others are not tested here");
  const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {6, 64, 128}, {13, 65, 129}, {37, 200, 300}, {7, 130, 1}, {128, 688, 260}};
  for (const GemmTile t : tiles) {
    CAPTURE(gemm_tile_name(t));
    set_gemm_tile(t);
    REQUIRE(gemm_tile() == t);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (const auto& s : sizes)
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (float beta : {0.f, 0.5f}) {
              check_gemm<float>(s[0], s[1], s[2], ta, tb, 0.75f, beta, true);
              check_gemm<float>(s[0], s[1], s[2], ta, tb, 1.25f, beta, false, true);
            }
    }
  }
  set_gemm_tile(GemmTile::Auto);
  set_num_threads(2);
  // Auto: the widest of the compiled tile and the CPU's.
  const auto compiled = static_cast<int64_t>(xsimd::batch<float>::size);
  const GemmTile best = compiled < 16 && f.avx512f                 ? GemmTile::Avx512
                        : compiled < 8 && f.avx2 && f.fma          ? GemmTile::Avx2
                                                                   : GemmTile::Compiled;
  CHECK(gemm_tile() == best);
  if (!f.avx512f) CHECK_THROWS_WITH_AS(set_gemm_tile(GemmTile::Avx512), doctest::Contains("has no AVX-512F"), Error);
}

TEST_CASE_TEMPLATE("gemm: a row epilogue gets every row of C once, when final, on every path", T, float, double) {
  // Tiny (Eigen), row tiles sharing one packing, too few rows for a row split (tiled, then the
  // epilogue over all rows), split along K, and column blocks over K slices (one thread).
  const int64_t sizes[][3] = {{5, 7, 3}, {300, 200, 150}, {100, 300, 200}, {40, 70, 1100}, {250, 600, 520}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& s : sizes)
      for (bool ta : {false, true})
        for (T beta : {T(0), T(1)}) {
          check_gemm<T>(s[0], s[1], s[2], ta, false, T(1), beta, false, true);
          check_gemm<T>(s[0], s[1], s[2], ta, true, T(1), beta, true, true);
        }
  }
  set_num_threads(2);
  // Shared packing with wide C: each row tile runs in several row blocks (C's block kept in L2).
  for (bool ta : {false, true})
    for (T beta : {T(0), T(1)}) check_gemm<T>(250, 1400, 300, ta, false, T(1), beta, false, true);
  // Row tiles that pack their own columns of B (op(B) over 16 MiB): tile rows offset into C.
  if constexpr (std::is_same_v<T, float>) check_gemm<T>(124, 4100, 1030, false, false, T(1), T(0), false, true);
}

TEST_CASE_TEMPLATE("gemm_packed: an empty sum (K = 0) scales C by beta and hands every row over once", T, float,
                   double) {
  for (T beta : {T(0), T(2)}) {
    std::vector<T> c(4 * 3, std::numeric_limits<T>::quiet_NaN());
    if (beta != T(0)) std::fill(c.begin(), c.end(), T(1.5));
    int64_t handed = 0;
    gemm_packed<T>(false, false, 4, 3, 0, T(1), nullptr, 1, nullptr, 3, beta, c.data(), 3,
                   [&](int64_t r0, int64_t r1) { handed += r1 - r0; });
    for (T x : c) CHECK(x == (beta == T(0) ? T(0) : T(3)));  // beta 0: C's NaNs are not read
    CHECK(handed == 4);
  }
}

TEST_CASE_TEMPLATE("gemm: a long K with few rows takes C's columns in blocks over the K slices", T, float, double) {
  // 250 rows, 600 columns, K = 520 (5 slices): C's columns go in blocks of 8 panels for both types.
  set_num_threads(1);
  for (bool ta : {false, true})
    for (T beta : {T(0), T(1)}) check_gemm<T>(250, 600, 520, ta, false, T(1), beta, true);
  check_gemm<T>(250, 600, 520, false, true, T(0.5), T(0.5), true);
  set_num_threads(2);
}

TEST_CASE_TEMPLATE("block_gemm: strided A (plain or transposed) times row-major B", T, float, double) {
  constexpr int64_t W = simd_width<T>();
  for (int64_t M : {1, 3, 8, 13, 64})
    for (int64_t N : {W, 2 * W, 3 * W, 5 * W})
      for (int64_t K : {1, 7, 32})
        for (bool ta : {false, true})
          for (T beta : {T(0), T(1)}) {
            const int64_t lda = ta ? M + 1 : K + 2, ldb = N + 3, ldc = N + 1;
            const auto A = random_vector<T>((ta ? K : M) * lda, 7);
            const auto B = random_vector<T>(K * ldb, 8);
            auto C = random_vector<T>(M * ldc, 9);
            const auto want = naive(ta, false, M, N, K, 0.5, A, lda, B, ldb, beta, C, ldc);
            block_gemm(M, N, K, T(0.5), A.data(), ta ? int64_t{1} : lda, ta ? lda : int64_t{1}, B.data(), ldb, beta,
                       C.data(), ldc);
            double worst = 0;
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) worst = std::max(worst, std::abs(C[i * ldc + j] - want[i * ldc + j]));
            CHECK_MESSAGE(worst < (std::is_same_v<T, float> ? 1e-5 : 1e-13), "M=", M, " N=", N, " K=", K);
          }
}

TEST_CASE_TEMPLATE("transpose_rows: whole 16 × 16 tiles and ragged edges, strided source and destination", T, float,
                   double) {
  for (int64_t n : {1, 15, 16, 33, 256})
    for (int64_t d : {1, 12, 16, 32, 35}) {
      const int64_t lds = d + 5, ld = n + 3;
      const auto src = random_vector<T>(n * lds, 11);
      std::vector<T> dst(static_cast<std::size_t>(d * ld), T(-7));
      transpose_rows(src.data(), lds, n, d, dst.data(), ld);
      int64_t wrong = 0;
      for (int64_t c = 0; c < d; ++c)
        for (int64_t j = 0; j < ld; ++j)  // the padding past n stays untouched
          wrong += dst[c * ld + j] != (j < n ? src[j * lds + c] : T(-7));
      CHECK_MESSAGE(wrong == 0, "n=", n, " d=", d);
    }
}

TEST_CASE("attention: the block-product path of the fused kernels equals the reference (double, GQA, causal)") {
  // Head size and key block are whole SIMD vectors of double, so the fused kernels take block_gemm.
  constexpr int64_t W = simd_width<double>();
  const int64_t B = 2, H = 4, Hkv = 2, T = 45, d = 2 * W;
  Rng rng(11);
  const auto q = rng.normal<double>({B, H, T, d}, 0, 1), k = rng.normal<double>({B, Hkv, T, d}, 0, 1),
             v = rng.normal<double>({B, Hkv, T, d}, 0, 1), dout = rng.normal<double>({B, H, T, d}, 0, 1);
  for (int64_t block : {W, 2 * W, int64_t{64}}) {
    AttentionOptions opt;
    opt.block_q = 5;
    opt.block_k = block;
    const score::Softmax s;
    const mask::Causal m;
    const auto ref = attention_reference_forward(s, m, q, k, v, {}, opt);
    const auto fused = attention_fused_forward(s, m, q, k, v, {}, opt);
    const auto gr = attention_reference_backward(s, m, q, k, v, {}, dout, opt);
    const auto gf = attention_fused_backward(s, m, q, k, v, {}, fused, dout, opt);
    auto max_diff = [](const Tensor<double>& a, const Tensor<double>& b) {
      double w = 0;
      for (int64_t i = 0; i < a.numel(); ++i) w = std::max(w, std::abs(a.data()[i] - b.data()[i]));
      return w;
    };
    CHECK(max_diff(ref.out, fused.out) < 1e-12);
    CHECK(max_diff(gr.dq, gf.dq) < 1e-11);
    CHECK(max_diff(gr.dk, gf.dk) < 1e-11);
    CHECK(max_diff(gr.dv, gf.dv) < 1e-11);
  }
}

TEST_CASE("RowTiles: every row in one tile, tiles in order, shrinking, whole units but where M ends") {
  for (int threads : {1, 2, 3, 16, 64})
    for (int64_t unit : {1, 4, 6, 32})
      for (int64_t M : {0, 1, 5, 31, 32, 33, 200, 901, 4096, 100003}) {
        CAPTURE(threads);
        CAPTURE(unit);
        CAPTURE(M);
        const kernels::cpu::detail::RowTiles t(M, threads, unit);
        REQUIRE(t.count >= 1);
        REQUIRE(t.count <= kernels::cpu::detail::kMaxRowTiles);
        CHECK(t.count <= std::max<int64_t>(1, 4 * int64_t{threads}));
        CHECK(t.starts[0] == 0);
        CHECK(t.starts[t.count] == M);
        int64_t bad = 0;
        for (int64_t i = 0; i < t.count; ++i) {
          const int64_t size = t.starts[i + 1] - t.starts[i];
          bad += size < 0;
          if (t.starts[i + 1] < M) bad += size % unit != 0;  // the tile that reaches M may be cut short
          if (i > 0 && t.starts[i + 1] < M) bad += size > t.starts[i] - t.starts[i - 1];  // and the last one longer
        }
        CHECK(bad == 0);
        // Enough tiles to share: where M has 4·threads units, the first tile is at most half of it,
        // and with rows to spare the first tile is at least 1.5 times the second to last.
        if (threads > 1 && M >= 4 * threads * unit) CHECK(t.starts[1] <= M / 2 + unit);
        if (t.count >= 4 && M >= 4 * t.count * t.count * unit)
          CHECK(2 * t.starts[1] >= 3 * (t.starts[t.count - 1] - t.starts[t.count - 2]));
      }
}

TEST_CASE("parallel_for: every index once, on several threads, nested loops serial, exceptions reach the caller") {
  set_num_threads(2);
  const int64_t n = 100003;
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  for (int rep = 0; rep < 50; ++rep)
    parallel_for(0, n, 1000, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    });
  bool all = true;
  for (auto& h : hits) all = all && h.load() == 50;
  CHECK(all);

  std::atomic<int> nested_parallel{0};
  parallel_for(0, 8, 1, [&](int64_t, int64_t) {
    CHECK(in_parallel_region());
    parallel_for(0, 1000, 1, [&](int64_t lo, int64_t hi) {
      if (lo != 0 || hi != 1000) nested_parallel.fetch_add(1);
    });
  });
  CHECK(nested_parallel.load() == 0);
  CHECK_FALSE(in_parallel_region());

  CHECK_THROWS_AS(parallel_for(0, 64, 1,
                               [&](int64_t lo, int64_t) {
                                 if (lo >= 32) throw std::runtime_error("chunk failed");
                               }),
                  std::runtime_error);
  // The pool still works after an exception.
  std::atomic<int64_t> sum{0};
  parallel_for(0, 1000, 10, [&](int64_t lo, int64_t hi) { sum.fetch_add(hi - lo); });
  CHECK(sum.load() == 1000);
}
