#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/data/toys.hpp"

using namespace sinklab;

TEST_CASE("toys: normal_quantile inverts the normal CDF") {
  CHECK(data::normal_quantile(0.5) == doctest::Approx(0.0).epsilon(1e-15));
  CHECK(data::normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-12));
  CHECK(data::normal_quantile(0.1) == doctest::Approx(-1.2815515655446004).epsilon(1e-12));
  for (double q : {1e-12, 1e-6, 0.01, 0.3, 0.7, 0.99, 1 - 1e-9})
    CHECK(0.5 * std::erfc(-data::normal_quantile(q) / std::sqrt(2.0)) == doctest::Approx(q).epsilon(1e-9));
  CHECK_THROWS_AS(data::normal_quantile(1.0), Error);
}

TEST_CASE("toys: NOP targets follow (1 - m) x + m γ x with m = 1[<x, v> > λ]") {
  data::NopToy toy({.d = 16, .seq_len = 8, .p = 0.3, .gamma = 0.1, .seed = 1});
  CHECK(toy.threshold() == doctest::Approx(data::normal_quantile(0.7)));
  const auto& v = toy.flag_direction();
  double n2 = 0;
  for (int64_t k = 0; k < 16; ++k) n2 += double(v(k)) * v(k);
  CHECK(n2 == doctest::Approx(1.0));

  Rng rng(11);
  auto b = toy.sample(rng, 512);
  CHECK(b.x.shape() == Shape{512, 8, 16});
  double flagged = 0;
  for (int64_t r = 0; r < 512; ++r)
    for (int64_t i = 0; i < 8; ++i) {
      double s = 0;
      for (int64_t k = 0; k < 16; ++k) s += double(b.x(r, i, k)) * v(k);
      const float m = s > toy.threshold() ? 1.f : 0.f;
      REQUIRE(b.mask(r, i) == m);
      REQUIRE(b.loss_weight(r, i) == 1.f);
      for (int64_t k = 0; k < 16; ++k)
        REQUIRE(b.target(r, i, k) == doctest::Approx((1 - m) * b.x(r, i, k) + m * 0.1f * b.x(r, i, k)));
      flagged += m;
    }
  CHECK(flagged / (512 * 8) == doctest::Approx(0.3).epsilon(0.1));  // P[m = 1] = p

  // Same seeds, same data; the config seed alone fixes v.
  Rng again(11);
  CHECK(toy.sample(again, 512).x.to_vector() == b.x.to_vector());
  data::NopToy same_v({.d = 16, .seq_len = 8, .p = 0.9, .seed = 1});
  CHECK(same_v.flag_direction().to_vector() == v.to_vector());
  data::NopToy other_v({.d = 16, .seq_len = 8, .seed = 2});
  CHECK(other_v.flag_direction().to_vector() != v.to_vector());
}

TEST_CASE("toys: NOP null token and explicit threshold") {
  data::NopToy toy({.d = 8, .seq_len = 5, .lambda = -100.0, .gamma = 0.0, .null_token = true});
  CHECK(toy.threshold() == -100.0);
  Rng rng(3);
  auto b = toy.sample(rng, 4);
  for (int64_t r = 0; r < 4; ++r) {
    CHECK(b.loss_weight(r, 0) == 0.f);
    CHECK(b.mask(r, 0) == 0.f);
    for (int64_t k = 0; k < 8; ++k) CHECK(b.x(r, 0, k) == 0.f);
    for (int64_t k = 0; k < 8; ++k) CHECK(b.target(r, 0, k) == 0.f);
    for (int64_t i = 1; i < 5; ++i) {
      CHECK(b.mask(r, i) == 1.f);  // λ = -100 flags everything
      CHECK(b.loss_weight(r, i) == 1.f);
      for (int64_t k = 0; k < 8; ++k) CHECK(b.target(r, i, k) == 0.f);  // γ = 0
    }
  }
  CHECK_THROWS_AS(data::NopToy({.p = 0.0}), Error);
}

TEST_CASE("toys: broadcast targets are x_i + α R x_{j*} with R orthogonal and j* the argmax") {
  data::BroadcastToy toy({.d = 12, .seq_len = 6, .alpha = 0.5, .seed = 4});
  const auto& R = toy.rotation();
  for (int64_t i = 0; i < 12; ++i)
    for (int64_t j = 0; j < 12; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 12; ++k) s += double(R(k, i)) * R(k, j);  // RᵀR = I
      CHECK(s == doctest::Approx(i == j ? 1.0 : 0.0).epsilon(1e-6));
    }
  const auto& u = toy.selector();
  Rng rng(8);
  auto b = toy.sample(rng, 32);
  CHECK(b.y.shape() == Shape{32, 6, 12});
  std::vector<int> hits(6, 0);
  for (int64_t r = 0; r < 32; ++r) {
    int64_t best = 0;
    double bs = -1e30;
    for (int64_t j = 0; j < 6; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 12; ++k) s += double(b.x(r, j, k)) * u(k);
      if (s > bs) bs = s, best = j;
    }
    REQUIRE(b.source(r) == best);
    ++hits[best];
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t k = 0; k < 12; ++k) {
        double rx = 0;
        for (int64_t m = 0; m < 12; ++m) rx += double(R(k, m)) * b.x(r, best, m);
        REQUIRE(b.y(r, i, k) == doctest::Approx(b.x(r, i, k) + 0.5 * rx).epsilon(1e-5));
      }
  }
  int used = 0;
  for (int h : hits) used += h > 0;
  CHECK(used >= 4);  // j* moves around the sequence
  data::BroadcastToy again({.d = 12, .seq_len = 6, .alpha = 0.5, .seed = 4});
  CHECK(again.rotation().to_vector() == R.to_vector());
  data::BroadcastToy other({.d = 12, .seq_len = 6, .seed = 5});
  CHECK(other.rotation().to_vector() != R.to_vector());
}
