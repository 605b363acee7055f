#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/core/rng.hpp"
#include "sinklab/quant/block_quant.hpp"

using namespace sinklab;
using namespace sinklab::quant;

TEST_CASE("FP4 E2M1 rounding: grid, ties to even mantissa, saturation") {
  for (double g : kE2M1Grid) {
    CHECK(round_to_e2m1(g) == g);
    CHECK(round_to_e2m1(-g) == -g);
  }
  CHECK(round_to_e2m1(0.25) == 0.0);
  CHECK(round_to_e2m1(0.75) == 1.0);
  CHECK(round_to_e2m1(1.25) == 1.0);
  CHECK(round_to_e2m1(1.75) == 2.0);
  CHECK(round_to_e2m1(2.5) == 2.0);
  CHECK(round_to_e2m1(3.5) == 4.0);
  CHECK(round_to_e2m1(5.0) == 4.0);
  CHECK(round_to_e2m1(-5.0) == -4.0);
  CHECK(round_to_e2m1(5.01) == 6.0);
  CHECK(round_to_e2m1(2.6) == 3.0);
  CHECK(round_to_e2m1(-0.2) == 0.0);
  CHECK(round_to_e2m1(7.0) == 6.0);
  CHECK(round_to_e2m1(-1e9) == -6.0);
}

TEST_CASE_TEMPLATE("block quantization lands exactly on scale × grid with fp32 absmax scales", T, float, double) {
  Rng rng(3);
  const auto x = rng.normal<T>({4, 40});  // 40 = two full blocks of 16 and a partial block of 8
  for (Format4 f : {Format4::fp4_e2m1, Format4::int4}) {
    const auto q = block_fake_quantize(x, f);
    REQUIRE(q.scales.shape() == Shape{4, 3});
    REQUIRE(q.values.shape() == x.shape());
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t nb = 0; nb < 3; ++nb) {
        double amax = 0;
        for (int64_t k = nb * 16; k < std::min<int64_t>(40, nb * 16 + 16); ++k)
          amax = std::max(amax, std::abs(double(x(r, k))));
        const float scale = q.scales(r, nb);
        CHECK(scale == static_cast<float>(amax / grid_max(f)));
        for (int64_t k = nb * 16; k < std::min<int64_t>(40, nb * 16 + 16); ++k) {
          const double g = round_to_grid(f, double(q.values(r, k)) / scale);
          if (f == Format4::fp4_e2m1) CHECK(on_e2m1_grid(g));
          else CHECK((g == std::round(g) && std::abs(g) <= 7));
          CHECK(q.values(r, k) == static_cast<T>(g * scale));
          // Nearest grid point: the error is at most half the local grid spacing (≤ 1 for FP4 near 6).
          CHECK(std::abs(double(q.values(r, k)) - double(x(r, k))) <= (f == Format4::int4 ? 0.5 : 1.0) * scale * (1 + 1e-6));
        }
      }
  }
}

TEST_CASE_TEMPLATE("block quantization: all-zero blocks, on-grid values and INT4 ties", T, float, double) {
  // Row 0: block 0 all zero, block 1 = scale × grid with scale 0.25 (absmax 6 · 0.25 = 1.5).
  auto x = Tensor<T>::zeros({1, 32});
  for (int64_t k = 0; k < 16; ++k) x(0, 16 + k) = T((k % 2 ? -1 : 1) * kE2M1Grid[k % 8] * 0.25);
  x(0, 31) = T(6 * 0.25);
  const auto q = block_fake_quantize(x, Format4::fp4_e2m1);
  CHECK(q.scales(0, 0) == 0.f);
  CHECK(q.scales(0, 1) == 0.25f);
  CHECK(q.values.to_vector() == x.to_vector());  // zeros stay zero, grid values are lossless

  // INT4, block absmax 7 → scale 1: 2.5 → 2 and 3.5 → 4 (ties to even), −0.5 → 0.
  auto y = Tensor<T>::from({1, 4}, {T(7), T(2.5), T(3.5), T(-0.5)});
  const auto qi = block_fake_quantize(y, Format4::int4, 4);
  CHECK(qi.scales(0, 0) == 1.f);
  CHECK(qi.values.to_vector() == std::vector<T>{T(7), T(2), T(4), T(0)});
  CHECK_THROWS_WITH_AS(block_fake_quantize(y, Format4::int4, 0), doctest::Contains("block size"), Error);
  y(0, 1) = std::numeric_limits<T>::infinity();
  CHECK_THROWS_WITH_AS(block_fake_quantize(y, Format4::int4), doctest::Contains("non-finite"), Error);
}

TEST_CASE("block quantization along axis 0 and per-token dynamic scales") {
  Rng rng(4);
  // A y·W-layout weight [K, N] blocked along K equals the PyTorch layout [N, K] blocked along its last axis.
  const auto W = rng.normal<float>({32, 3});
  const auto a = block_fake_quantize(W, Format4::fp4_e2m1, 16, 0);
  const auto b = block_fake_quantize(W.transpose(0, 1), Format4::fp4_e2m1, 16, -1);
  CHECK(a.values.shape() == Shape{32, 3});
  CHECK(a.values.to_vector() == b.values.transpose(0, 1).contiguous().to_vector());
  CHECK(a.scales.to_vector() == b.scales.to_vector());
  // Per-token: one scale per row of [B, T, K], from that row's own absmax.
  const auto x = rng.normal<double>({2, 3, 10});
  const auto p = per_token_fake_quantize(x, Format4::int4);
  REQUIRE(p.scales.shape() == Shape{6, 1});
  for (int64_t r = 0; r < 6; ++r) {
    double amax = 0;
    for (int64_t k = 0; k < 10; ++k) amax = std::max(amax, std::abs(x.data()[r * 10 + k]));
    CHECK(p.scales(r, 0) == static_cast<float>(amax / 7));
  }
}
