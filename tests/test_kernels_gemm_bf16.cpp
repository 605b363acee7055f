// kernels::cpu::gemm_bf16: bf16 operands, fp32 accumulation. Each path (AMX and AVX512-BF16 where
// the CPU has them, the AMX kernel on the emulated tile unit, the emulation everywhere) against a
// double reference of the rounded operands within fp32's accumulation bound and against the
// unrounded product within bf16's bound; edge shapes (M, N, K off the tile sizes, K = 1, K odd, K over one slice),
// every transpose, strided operands, alpha/beta and the row epilogue.
#include <doctest/doctest.h>

#include "skip.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/gemm_bf16.hpp"

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

template <class Tiles = kernels::cpu::detail::amx::HardwareTiles>
void check_case(const Case& c, Bf16Path path) {
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
  gemm_bf16<Tiles>(
      c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data.data(), A.ld, B.data.data(), B.ld, c.beta, C.data(), ldc,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) ++epilogue_rows[static_cast<std::size_t>(r)];
      },
      path);
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

}  // namespace

TEST_CASE("gemm_bf16, emulated: within fp32 accumulation of the rounded operands, and bf16 of the exact") {
  for (const Case& c : cases()) check_case(c, Bf16Path::Emulated);
}

TEST_CASE("gemm_bf16, AVX512-BF16: the same bounds, and the same result for any thread count" *
          sinklab_test::optional()) {
  if (!kernels::cpu::bf16_native_available())
    SINKLAB_SKIP("this CPU has no AVX512-BF16 (", cpu_features().summary(), ")");
  for (const Case& c : cases()) check_case(c, Bf16Path::Avx512Bf16);
  // Row blocks are independent and each element sums its K slices in one order: bit-identical
  // whatever the number of threads.
  Rng rng(7);
  const int64_t M = 300, N = 200, K = 700;
  const Tensor<float> a = rng.normal<float>({M, K}), b = rng.normal<float>({K, N});
  std::vector<float> c1(M * N), c2(M * N);
  const int before = num_threads();
  set_num_threads(1);
  gemm_bf16(Trans::N, Trans::N, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c1.data(), N, {}, Bf16Path::Avx512Bf16);
  set_num_threads(2);
  gemm_bf16(Trans::N, Trans::N, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c2.data(), N, {}, Bf16Path::Avx512Bf16);
  set_num_threads(before);
  CHECK(c1 == c2);
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
