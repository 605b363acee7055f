// kernels::cpu::gemm_u8s8: uint8 activations (zero point) against int8 weights, int32 sums. Each
// path (AMX, AVX512-VNNI and AVX2 where the CPU has them, the AMX kernel on the emulated tile
// unit, the portable one everywhere) against a plain int64 reference,
// exactly, for edge shapes (M, N, K off the tile sizes, K = 1, K odd, padded rows); the float
// form against the same sum times the scale; and the whole W8A8 product against fake
// quantization (quant/uniform.hpp) of the same float operands.
#include <doctest/doctest.h>

#include "skip.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/kernels/cpu/gemm_s8.hpp"
#include "sinklab/quant/uniform.hpp"

using namespace sinklab;
using kernels::cpu::gemm_u8s8;
using kernels::cpu::gemm_u8s8_i32;
using kernels::cpu::pack_s8;
using kernels::cpu::S8Path;
using Emulated = kernels::cpu::detail::amx::EmulatedTiles;

namespace {

struct Operands {
  int64_t M, N, K, lda, ldb;
  int32_t za;
  std::vector<uint8_t> A;
  std::vector<int8_t> B;
};

Operands make(int64_t M, int64_t N, int64_t K, int64_t pad, int32_t za, uint64_t seed) {
  Rng rng(seed);
  Operands o{M, N, K, K + pad, N + pad, za, {}, {}};
  const Tensor<float> ua = rng.uniform<float>({M * o.lda}, 0.0f, 256.0f), ub = rng.uniform<float>({K * o.ldb}, -128.0f, 128.0f);
  for (int64_t i = 0; i < M * o.lda; ++i) o.A.push_back(static_cast<uint8_t>(std::min(255.0f, ua.data()[i])));
  for (int64_t i = 0; i < K * o.ldb; ++i)
    o.B.push_back(static_cast<int8_t>(std::clamp(std::floor(ub.data()[i]), -128.0f, 127.0f)));
  // The extremes, where an int16 pair or the int32 sum would overflow if anything were narrower.
  o.A[0] = 255;
  o.B[0] = -128;
  return o;
}

int64_t reference(const Operands& o, int64_t i, int64_t j) {
  int64_t s = 0;
  for (int64_t k = 0; k < o.K; ++k) s += (int64_t{o.A[i * o.lda + k]} - o.za) * o.B[k * o.ldb + j];
  return s;
}

template <class Tiles = kernels::cpu::detail::amx::HardwareTiles>
void check(const Operands& o, S8Path path) {
  CAPTURE(o.M);
  CAPTURE(o.N);
  CAPTURE(o.K);
  const auto packed = pack_s8(o.B.data(), o.ldb, o.K, o.N);
  const int64_t ldc = o.N + 3;
  std::vector<int32_t> C(static_cast<std::size_t>(o.M * ldc), -7);
  gemm_u8s8_i32<Tiles>(o.M, o.A.data(), o.lda, o.za, packed, C.data(), ldc, path);
  std::vector<float> F(static_cast<std::size_t>(o.M * ldc), -7.f);
  const float scale = 0.0123f;
  gemm_u8s8<Tiles>(o.M, o.A.data(), o.lda, o.za, packed, scale, F.data(), ldc, path);
  int64_t wrong = 0, wrong_f = 0, touched = 0;
  for (int64_t i = 0; i < o.M; ++i) {
    for (int64_t j = 0; j < o.N; ++j) {
      const int64_t r = reference(o, i, j);
      wrong += C[i * ldc + j] != r;
      wrong_f += F[i * ldc + j] != static_cast<float>(static_cast<double>(r) * double{scale});
    }
    for (int64_t j = o.N; j < ldc; ++j) touched += C[i * ldc + j] != -7 || F[i * ldc + j] != -7.f;
  }
  CHECK(wrong == 0);
  CHECK(wrong_f == 0);
  CHECK(touched == 0);  // the padding of C's rows is never written
}

std::vector<Operands> cases() {
  std::vector<Operands> v;
  uint64_t seed = 1;
  for (int64_t M : {1, 5, 6, 7, 13, 64})
    for (int64_t N : {1, 15, 16, 17, 40})
      for (int64_t K : {1, 2, 3, 64, 129}) v.push_back(make(M, N, K, 0, 128, seed++));
  v.push_back(make(37, 75, 300, 5, 0, seed++));    // padded operands, zero point 0
  v.push_back(make(37, 75, 300, 1, 255, seed++));  // zero point at the top of the range
  v.push_back(make(200, 96, 1024, 0, 131, seed++));
  return v;
}

}  // namespace

TEST_CASE("gemm_u8s8, portable path: exact int32 sums and their scaled floats, any thread count") {
  for (const auto& o : cases()) check(o, S8Path::Scalar);
  set_num_threads(1);
  check(make(200, 96, 1024, 0, 131, 99), S8Path::Scalar);
  set_num_threads(2);
}

// Rows taken in tiles that shrink, each in blocks of at most 192 rows: M = 900 on one thread
// gives four tiles, the first of 360–384 rows (two blocks); three threads take twelve smaller
// tiles (whole 4-, 6- or 32-row units by path). Every path and thread count gives the same integers.
TEST_CASE("gemm_u8s8: tiles of rows longer than a block, every path on 1 and 3 threads") {
  const Operands o = make(900, 70, 37, 2, 17, 123);
  std::vector<S8Path> paths{S8Path::Scalar};
  if (kernels::cpu::s8_avx2_available()) paths.push_back(S8Path::Avx2);
  if (kernels::cpu::s8_vnni_available()) paths.push_back(S8Path::Vnni);
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    set_num_threads(threads);
    for (S8Path path : paths) check(o, path);
    if (kernels::cpu::s8_vnni_available()) check<Emulated>(o, S8Path::Amx);
  }
  set_num_threads(2);
}

TEST_CASE("gemm_u8s8, AVX2: the same sums exactly" * sinklab_test::optional()) {
  if (!kernels::cpu::s8_avx2_available()) SINKLAB_SKIP("this CPU has no AVX2 (", cpu_features().summary(), ")");
  for (const auto& o : cases()) check(o, S8Path::Avx2);
}

TEST_CASE("gemm_u8s8, AVX512-VNNI: the same sums exactly, the zero point through B's column sums" *
          sinklab_test::optional()) {
  if (!kernels::cpu::s8_vnni_available()) SINKLAB_SKIP("this CPU has no AVX512-VNNI (", cpu_features().summary(), ")");
  for (const auto& o : cases()) check(o, S8Path::Vnni);
  // The largest K with a = 255, b = −128: Σ a·b and za·Σ b at their bound, for zero points 0 and 255.
  for (int32_t za : {0, 255}) {
    Operands big = make(7, 70, kernels::cpu::detail::s8::kMaxK, 0, za, 77);
    std::fill(big.A.begin(), big.A.end(), uint8_t{255});
    std::fill(big.B.begin(), big.B.end(), int8_t{-128});
    check(big, S8Path::Vnni);
  }
}

// The AMX kernel on amx.hpp's model of the tile unit (gemm_u8s8<EmulatedTiles>): its padding to
// whole tiles, strides, edges and the shared epilogue, exactly.
TEST_CASE("gemm_u8s8, AMX kernel on the emulated tile unit: the same sums exactly" * sinklab_test::optional()) {
  if (!kernels::cpu::s8_vnni_available())
    SINKLAB_SKIP("the AMX kernel's epilogue is AVX512-VNNI code, which this CPU lacks (", cpu_features().summary(),
                 ")");
  for (const auto& o : cases()) check<Emulated>(o, S8Path::Amx);
  Operands big = make(7, 70, kernels::cpu::detail::s8::kMaxK, 0, 255, 78);
  std::fill(big.A.begin(), big.A.end(), uint8_t{255});
  std::fill(big.B.begin(), big.B.end(), int8_t{-128});
  check<Emulated>(big, S8Path::Amx);
}

TEST_CASE("gemm_u8s8, AMX on the hardware: the same sums exactly" * sinklab_test::optional()) {
  if (!cpu_features().amx_int8 || !cpu_features().amx_permitted || !kernels::cpu::s8_vnni_available())
    SINKLAB_SKIP("this CPU or OS offers no AMX-INT8 (", cpu_features().summary(), ")");
  if (kernels::cpu::amx_disabled_by_env()) SINKLAB_SKIP("SINKLAB_NO_AMX is set");
  CHECK(kernels::cpu::s8_amx_available());  // the once-per-process self-check passed
  for (const auto& o : cases()) check(o, S8Path::Amx);
  for (int32_t za : {0, 255}) {
    Operands big = make(7, 70, kernels::cpu::detail::s8::kMaxK, 0, za, 79);
    std::fill(big.A.begin(), big.A.end(), uint8_t{255});
    std::fill(big.B.begin(), big.B.end(), int8_t{-128});
    check(big, S8Path::Amx);
  }
}

TEST_CASE("gemm_u8s8 equals W8A8 fake quantization: integer sums exact, floats within their rounding") {
  // X asymmetric per tensor (uint8, zero point), W symmetric per tensor (int8), as quant/ does.
  const int64_t M = 23, K = 70, N = 33;
  Rng rng(5);
  const Tensor<float> X = rng.normal<float>({M, K}, 0.3f, 1.5f), W = rng.normal<float>({K, N}, 0.0f, 0.05f);
  const auto qx = quant::UniformQuantizer::asymmetric(-3.0, 5.0), qw = quant::UniformQuantizer::symmetric(0.15);
  std::vector<uint8_t> A;
  std::vector<int8_t> B;
  for (int64_t i = 0; i < M * K; ++i) A.push_back(static_cast<uint8_t>(qx.quantize(X.data()[i])));
  for (int64_t i = 0; i < K * N; ++i) B.push_back(static_cast<int8_t>(qw.quantize(W.data()[i])));
  const Tensor<float> Xf = quant::fake_quantize(X, qx), Wf = quant::fake_quantize(W, qw);
  std::vector<float> C(static_cast<std::size_t>(M * N));
  gemm_u8s8(M, A.data(), K, qx.zero_point, pack_s8(B.data(), N, K, N), qx.scale * qw.scale, C.data(), N);
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double fake = 0;  // the fake-quantized product, in double
      int64_t ints = 0;
      for (int64_t k = 0; k < K; ++k) {
        fake += double(Xf.data()[i * K + k]) * double(Wf.data()[k * N + j]);
        ints += (int64_t{A[i * K + k]} - qx.zero_point) * B[k * N + j];
      }
      // The fake-quantized operands are exactly (q − z)·s in fp32 up to one rounding each.
      CHECK(std::abs(fake - double(ints) * double(qx.scale) * double(qw.scale)) <= 1e-5 * (1 + std::abs(fake)));
      worst = std::max(worst, std::abs(double(C[i * N + j]) - fake) / (1 + std::abs(fake)));
    }
  CHECK(worst < 1e-5);
}

TEST_CASE("gemm_u8s8: bad arguments name what was expected") {
  const std::vector<int8_t> b(4, 1);
  CHECK_THROWS_WITH_AS(pack_s8(b.data(), 2, 2, 3), doctest::Contains("ldb >= N"), Error);
  CHECK_THROWS_WITH_AS(pack_s8(b.data(), 1, 70000, 1), doctest::Contains("overflow"), Error);
  const auto p = pack_s8(b.data(), 2, 2, 2);
  const std::vector<uint8_t> a(4, 1);
  std::vector<int32_t> c(4);
  CHECK_THROWS_WITH_AS(gemm_u8s8_i32(2, a.data(), 1, 0, p, c.data(), 2), doctest::Contains("lda >= K"), Error);
  CHECK_THROWS_WITH_AS(gemm_u8s8_i32(2, a.data(), 2, 300, p, c.data(), 2), doctest::Contains("zero point"), Error);
  // No rows: nothing computed, C untouched, on every path.
  for (S8Path path : {S8Path::Auto, S8Path::Scalar}) {
    std::vector<int32_t> untouched(4, -7);
    gemm_u8s8_i32(0, a.data(), 2, 0, p, untouched.data(), 2, path);
    CHECK(untouched == std::vector<int32_t>(4, -7));
  }
}
