// kernels::cpu::gemm_bf16: bf16 operands, fp32 accumulation. Each path (AMX and AVX512-BF16 where
// the CPU has them, the AMX kernel on the emulated tile unit, the emulation everywhere) against a
// double reference of the rounded operands within fp32's accumulation bound and against the
// unrounded product within bf16's bound; edge shapes (M, N, K off the tile sizes, K = 1, K odd, K over one slice),
// every transpose, strided operands, alpha/beta and the row epilogue. The fused attention's bf16
// block products (BlockProducts) on the same paths and bounds, and their reuse of packed operands.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/block_products.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"
#include "skip.hpp"

using namespace sinklab;
using kernels::Trans;
using kernels::cpu::Bf16Path;
using Emulated = kernels::cpu::detail::amx::EmulatedTiles;
using sinklab::from_bf16;
using kernels::cpu::gemm_bf16;
using sinklab::round_bf16;
using sinklab::to_bf16;

TEST_CASE("to_bf16: round to nearest even, NaN stays NaN, overflow rounds to infinity") {
  CHECK(from_bf16(to_bf16(1.0f)) == 1.0f);
  CHECK(from_bf16(to_bf16(-2.5f)) == -2.5f);
  // 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: ties go to the even mantissa (1).
  CHECK(round_bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  CHECK(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isinf(round_bf16(std::numeric_limits<float>::max())));
  CHECK(round_bf16(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(round_bf16(0.0f) == 0.0f);
}

namespace {

struct Case {
  int64_t M, N, K;
  Trans ta, tb;
  int64_t pad;  // extra columns in every operand's leading dimension
  float alpha, beta;
};

// The stored matrix behind op(X) [rows, cols], with leading dimension cols_stored + pad.
struct Operand {
  std::vector<float> data;
  int64_t ld;
  bool trans;
  float operator()(int64_t r, int64_t c) const { return trans ? data[c * ld + r] : data[r * ld + c]; }
};

Operand make(Rng& rng, int64_t rows, int64_t cols, Trans t, int64_t pad) {
  const int64_t sr = t == Trans::N ? rows : cols, sc = t == Trans::N ? cols : rows;
  Operand o{std::vector<float>(static_cast<std::size_t>(sr * (sc + pad))), sc + pad, t == Trans::T};
  const Tensor<float> x = rng.normal<float>({sr * (sc + pad)});
  for (std::size_t i = 0; i < o.data.size(); ++i) o.data[i] = x.data()[i];
  return o;
}

// gemm_bf16, or with `block` the attention's bf16 block products (BlockProducts: B as stored, op(A)
// through strides, no epilogue).
template <class Tiles = kernels::cpu::detail::amx::HardwareTiles>
void check_case(const Case& c, Bf16Path path, bool block = false) {
  CAPTURE(block);
  CAPTURE(c.M);
  CAPTURE(c.N);
  CAPTURE(c.K);
  CAPTURE(static_cast<int>(c.ta));
  CAPTURE(static_cast<int>(c.tb));
  CAPTURE(c.pad);
  Rng rng(uint64_t(c.M * 1000003 + c.N * 1009 + c.K));
  const Operand A = make(rng, c.M, c.K, c.ta, c.pad), B = make(rng, c.K, c.N, c.tb, c.pad);
  const int64_t ldc = c.N + c.pad;
  std::vector<float> C(static_cast<std::size_t>(c.M * ldc));
  const Tensor<float> c0 = rng.normal<float>({c.M * ldc});
  for (std::size_t i = 0; i < C.size(); ++i) C[i] = c0.data()[i];
  const std::vector<float> before = C;
  std::vector<int> epilogue_rows(static_cast<std::size_t>(c.M), 0);
  if (block) {
    REQUIRE(c.tb == Trans::N);
    const bool ta = c.ta == Trans::T;
    kernels::cpu::BlockProducts<float, Tiles> ops(kernels::Precision::bf16, path);
    const auto a = ops.a(0, -1, c.M, c.K, A.data.data(), ta ? 1 : A.ld, ta ? A.ld : 1);
    ops.product(c.M, c.N, a, ops.b(0, -1, c.K, c.N, B.data.data(), B.ld), c.alpha, c.beta, C.data(), ldc);
    std::fill(epilogue_rows.begin(), epilogue_rows.end(), 1);
  } else {
    gemm_bf16<Tiles>(
        c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data.data(), A.ld, B.data.data(), B.ld, c.beta, C.data(), ldc,
        [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) ++epilogue_rows[static_cast<std::size_t>(r)];
        },
        path);
  }
  for (int64_t i = 0; i < c.M; ++i) CHECK(epilogue_rows[static_cast<std::size_t>(i)] == 1);
  const double u = std::ldexp(1.0, -24);
  double worst_acc = 0, worst_bf16 = 0;
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = C[static_cast<std::size_t>(i * ldc + j)], c_in = before[static_cast<std::size_t>(i * ldc + j)];
      if (j >= c.N) {  // the padding of C is never written
        CHECK(got == c_in);
        continue;
      }
      double rounded = 0, exact = 0, mag = 0, mag_exact = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double ra = round_bf16(A(i, k)), rb = round_bf16(B(k, j));
        rounded += ra * rb;
        mag += std::abs(ra * rb);
        exact += double(A(i, k)) * double(B(k, j));
        mag_exact += std::abs(double(A(i, k)) * double(B(k, j)));
      }
      const double scale = std::abs(c.alpha) * mag + std::abs(c.beta * c_in);
      const double want = c.alpha * rounded + c.beta * double(c_in);
      // fp32 sums of K exact products, then alpha and beta: (K + 3)·u relative to the magnitudes.
      const double err = std::abs(double(got) - want) / (double(c.K + 3) * u * scale + 1e-30);
      worst_acc = std::max(worst_acc, err);
      // Against the unrounded operands: each operand within 2^-8 relative (bf16 keeps 8 significant
      // bits), so a product within ~2^-7.
      const double err_exact = std::abs(double(got) - (c.alpha * exact + c.beta * double(c_in))) /
                               (std::ldexp(1.0, -7) * std::abs(c.alpha) * mag_exact + double(c.K + 3) * u * scale + 1e-30);
      worst_bf16 = std::max(worst_bf16, err_exact);
    }
  CHECK(worst_acc <= 1.0);
  CHECK(worst_bf16 <= 1.0);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> cs = [] {
    std::vector<Case> v;
    const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},   {7, 5, 3},     {6, 64, 2},    {13, 70, 257},
                                                        {5, 129, 1}, {100, 65, 33}, {37, 200, 513}, {250, 96, 128}};
    for (const auto& s : shapes)
      for (Trans ta : {Trans::N, Trans::T})
        for (Trans tb : {Trans::N, Trans::T}) v.push_back({s[0], s[1], s[2], ta, tb, 0, 1.0f, 0.0f});
    v.push_back({31, 77, 300, Trans::N, Trans::N, 3, 0.5f, 0.25f});  // strided, alpha and beta
    v.push_back({31, 77, 300, Trans::T, Trans::T, 5, -2.0f, 1.0f});
    return v;
  }();
  return cs;
}

// The block products' cases: B as stored; the attention's shapes (32-query blocks, 128-key blocks,
// head sizes 16–128: panels of at most 32 columns take the half-width tile) and edges.
const std::vector<Case>& block_cases() {
  static const std::vector<Case> cs = [] {
    std::vector<Case> v;
    for (const Case& c : cases())
      if (c.tb == Trans::N) v.push_back(c);
    const std::vector<std::array<int64_t, 3>> shapes = {{128, 32, 64}, {32, 64, 128}, {32, 16, 128}, {100, 48, 64},
                                                        {33, 128, 64}, {128, 80, 31}, {2, 32, 1},    {64, 17, 5}};
    for (const auto& s : shapes)
      for (Trans ta : {Trans::N, Trans::T}) v.push_back({s[0], s[1], s[2], ta, Trans::N, 0, 0.125f, 0.0f});
    v.push_back({32, 64, 128, Trans::T, Trans::N, 7, 1.0f, 1.0f});  // strided, accumulating
    v.push_back({45, 30, 77, Trans::N, Trans::N, 2, -0.5f, 0.75f});
    return v;
  }();
  return cs;
}

}  // namespace

TEST_CASE("BlockProducts in bf16 (the attention's products), every path: the same bounds as gemm_bf16") {
  for (const Case& c : block_cases()) check_case(c, Bf16Path::Emulated, true);
  if (!kernels::cpu::bf16_native_available()) {
    MESSAGE("the AVX512-BF16 and AMX-kernel cases need AVX512-BF16, which this CPU lacks (", cpu_features().summary(),
            ")");
    return;
  }
  for (const Case& c : block_cases()) check_case(c, Bf16Path::Avx512Bf16, true);
  for (const Case& c : block_cases()) check_case<Emulated>(c, Bf16Path::Amx, true);
  if (cpu_features().amx_bf16 && cpu_features().amx_permitted && !kernels::cpu::amx_disabled_by_env())
    for (const Case& c : block_cases()) check_case(c, Bf16Path::Amx, true);
}

// An operand asked again for the same slot with the same tag, source and shape is not packed again
// (the attention keeps its key blocks' packing across query blocks); another tag, or tag −1, packs.
template <class Tiles = kernels::cpu::detail::amx::HardwareTiles>
void check_reuse(Bf16Path path) {
  Rng rng(3);
  const int64_t M = 40, N = 48, K = 33;
  Tensor<float> a = rng.normal<float>({M, K}), b = rng.normal<float>({K, N});
  std::vector<float> c1(M * N), c2(M * N), c3(M * N);
  kernels::cpu::BlockProducts<float, Tiles> ops(kernels::Precision::bf16, path);
  ops.product(M, N, ops.a(1, 7, M, K, a.data(), K, 1), ops.b(2, 7, K, N, b.data(), N), 1.0f, 0.0f, c1.data(), N);
  const Tensor<float> a0 = a.clone(), b0 = b.clone();
  for (int64_t i = 0; i < a.numel(); ++i) a.data()[i] *= 2.0f;
  for (int64_t i = 0; i < b.numel(); ++i) b.data()[i] *= 2.0f;
  ops.product(M, N, ops.a(1, 7, M, K, a.data(), K, 1), ops.b(2, 7, K, N, b.data(), N), 1.0f, 0.0f, c2.data(), N);
  CHECK(c2 == c1);  // the packing of tag 7
  ops.product(M, N, ops.a(1, 8, M, K, a.data(), K, 1), ops.b(2, -1, K, N, b.data(), N), 1.0f, 0.0f, c3.data(), N);
  for (std::size_t i = 0; i < c1.size(); ++i)
    CHECK(c3[i] == 4.0f * c1[i]);  // both packed again (powers of 2 are exact)
}

// The attention packs a key block whole and multiplies part of it (the keys a query block sees):
// the first M rows of a packed A, and B's first k rows where A has k columns (k odd too).
template <class Tiles = kernels::cpu::detail::amx::HardwareTiles>
void check_partial(Bf16Path path) {
  Rng rng(5);
  const int64_t rows = 100, k_whole = 64, N = 40;
  const Tensor<float> a = rng.normal<float>({rows, k_whole}), b = rng.normal<float>({k_whole, N});
  kernels::cpu::BlockProducts<float, Tiles> ops(kernels::Precision::bf16, path);
  const auto bw = ops.b(0, 1, k_whole, N, b.data(), N);  // B packed whole
  for (int64_t M : {100, 37, 1})
    for (int64_t k : {64, 31, 16, 1}) {
      CAPTURE(M);
      CAPTURE(k);
      std::vector<float> got(M * N), want(M * N);
      ops.product(M, N, ops.a(1, 1, rows, k, a.data(), k_whole, 1), bw, 1.0f, 0.0f, got.data(), N);  // A packed whole
      kernels::cpu::BlockProducts<float, Tiles> exact(kernels::Precision::bf16, path);
      exact.product(M, N, exact.a(0, -1, M, k, a.data(), k_whole, 1), exact.b(0, -1, k, N, b.data(), N), 1.0f, 0.0f,
                    want.data(), N);
      CHECK(got == want);
    }
}

TEST_CASE("BlockProducts: a packed operand is kept per slot and tag; bad strides are refused; fp32 passes through") {
  check_reuse(Bf16Path::Emulated);
  check_partial(Bf16Path::Emulated);
  if (kernels::cpu::bf16_native_available()) {
    check_reuse(Bf16Path::Avx512Bf16);
    check_reuse<Emulated>(Bf16Path::Amx);
    check_partial(Bf16Path::Avx512Bf16);
    check_partial<Emulated>(Bf16Path::Amx);
  }
  // A with no unit stride is refused (the packers read rows or columns of a row-major matrix).
  float x[4] = {};
  kernels::cpu::BlockProducts<float> ops(kernels::Precision::bf16);
  CHECK_THROWS_WITH_AS(ops.a(0, -1, 2, 2, x, 2, 2), doctest::Contains("unit stride"), Error);
  // fp32: the products are block_gemm's, on the operands as stored.
  Rng rng(4);
  const Tensor<float> a = rng.normal<float>({5, 7}), b = rng.normal<float>({7, 32});
  std::vector<float> c1(5 * 32), c2(5 * 32);
  kernels::cpu::BlockProducts<float> fp32(kernels::Precision::fp32);
  fp32.product(5, 32, fp32.a(0, -1, 5, 7, a.data(), 7, 1), fp32.b(0, -1, 7, 32, b.data(), 32), 0.5f, 0.0f, c1.data(),
               32);
  kernels::cpu::block_gemm(5, 32, 7, 0.5f, a.data(), 7, int64_t{1}, b.data(), 32, 0.0f, c2.data(), 32);
  CHECK(c1 == c2);
}

TEST_CASE("gemm_bf16, emulated: within fp32 accumulation of the rounded operands, and bf16 of the exact") {
  for (const Case& c : cases()) check_case(c, Bf16Path::Emulated);
}

TEST_CASE("gemm_bf16, AVX512-BF16: the same bounds, and the same result for any thread count" *
          sinklab_test::optional()) {
  if (!kernels::cpu::bf16_native_available())
    SINKLAB_SKIP("this CPU has no AVX512-BF16 (", cpu_features().summary(), ")");
  for (const Case& c : cases()) check_case(c, Bf16Path::Avx512Bf16);
  // Row tiles are independent and each element sums its K slices in one order: bit-identical
  // whatever the number of threads. M = 900: on one thread the first tile has 360 rows, taken in
  // blocks of at most 192, each handed to the epilogue once it is final.
  Rng rng(7);
  const int64_t M = 900, N = 200, K = 700;
  const Tensor<float> a = rng.normal<float>({M, K}), b = rng.normal<float>({K, N});
  std::vector<float> c1(M * N), c2(M * N);
  std::vector<int> seen(M, 0);
  const int before = num_threads();
  set_num_threads(1);
  gemm_bf16(
      Trans::N, Trans::N, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c1.data(), N,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) ++seen[static_cast<std::size_t>(r)];
      },
      Bf16Path::Avx512Bf16);
  set_num_threads(2);
  gemm_bf16(Trans::N, Trans::N, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c2.data(), N, {}, Bf16Path::Avx512Bf16);
  set_num_threads(before);
  CHECK(c1 == c2);
  CHECK(seen == std::vector<int>(M, 1));
}

// The AMX kernel on amx.hpp's model of the tile unit (gemm_bf16<EmulatedTiles>): its packing,
// padding to whole tiles, strides and edges, within the same bounds (its fp32 sums in the order
// of the Intel SDM's pseudo-code).
TEST_CASE("gemm_bf16, AMX kernel on the emulated tile unit: the same bounds, any thread count" *
          sinklab_test::optional()) {
  if (!kernels::cpu::bf16_native_available())
    SINKLAB_SKIP("the AMX kernel packs with AVX512-BF16, which this CPU lacks (", cpu_features().summary(), ")");
  for (const Case& c : cases()) check_case<Emulated>(c, Bf16Path::Amx);
  Rng rng(8);
  const int64_t M = 70, N = 90, K = 530;  // three K slices, the last one not whole tiles
  const Tensor<float> a = rng.normal<float>({M, K}), b = rng.normal<float>({K, N});
  std::vector<float> c1(M * N), c2(M * N);
  const int before = num_threads();
  set_num_threads(1);
  gemm_bf16<Emulated>(Trans::N, Trans::T, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c1.data(), N, {},
                      Bf16Path::Amx);
  set_num_threads(2);
  gemm_bf16<Emulated>(Trans::N, Trans::T, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c2.data(), N, {},
                      Bf16Path::Amx);
  set_num_threads(before);
  CHECK(c1 == c2);
  // A row epilogue that multiplies on AMX itself: the tiles are released before it runs (a nested
  // release inside a configured block would fault on the hardware; the emulator throws). One
  // thread, so that the epilogue runs between blocks of one task.
  std::vector<float> inner(4 * 4);
  const std::vector<float> ones(4 * 40, 1.0f);
  set_num_threads(1);
  gemm_bf16<Emulated>(
      Trans::N, Trans::T, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c2.data(), N,
      [&](int64_t, int64_t) {
        gemm_bf16<Emulated>(Trans::N, Trans::N, 4, 4, 40, 1.0f, ones.data(), 40, ones.data(), 4, 0.0f, inner.data(), 4,
                            {}, Bf16Path::Amx);
      },
      Bf16Path::Amx);
  set_num_threads(before);
  CHECK(c1 == c2);
  CHECK(inner == std::vector<float>(16, 40.0f));
}

TEST_CASE("gemm_bf16, AMX on the hardware: the same bounds" * sinklab_test::optional()) {
  if (!cpu_features().amx_bf16 || !cpu_features().amx_permitted)
    SINKLAB_SKIP("this CPU or OS offers no AMX-BF16 (", cpu_features().summary(), ")");
  if (kernels::cpu::amx_disabled_by_env()) SINKLAB_SKIP("SINKLAB_NO_AMX is set");
  CHECK(kernels::cpu::bf16_amx_available());  // the once-per-process self-check passed
  for (const Case& c : cases()) check_case(c, Bf16Path::Amx);
}

TEST_CASE("gemm_bf16: an empty K gives beta·C; asking for a missing ISA names the CPU") {
  std::vector<float> C = {1, 2, 3, 4};
  const float A[1] = {0}, B[1] = {0};
  gemm_bf16(Trans::N, Trans::N, 2, 2, 0, 1.0f, A, 1, B, 2, 0.5f, C.data(), 2);
  CHECK(C == std::vector<float>{0.5f, 1, 1.5f, 2});
  if (!kernels::cpu::bf16_native_available())
    CHECK_THROWS_WITH_AS(gemm_bf16(Trans::N, Trans::N, 1, 1, 1, 1.0f, A, 1, B, 1, 0.0f, C.data(), 1, {}, Bf16Path::Avx512Bf16),
                         doctest::Contains("AVX512-BF16"), Error);
  if (!cpu_features().amx_bf16)
    CHECK_THROWS_WITH_AS(gemm_bf16(Trans::N, Trans::N, 1, 1, 1, 1.0f, A, 1, B, 1, 0.0f, C.data(), 1, {}, Bf16Path::Amx),
                         doctest::Contains("AMX"), Error);
}
