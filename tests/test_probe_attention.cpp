#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sinklab/probe/attention_sink.hpp"
#include "sinklab/probe/delta_logit.hpp"
#include "sinklab/probe/sink_rate.hpp"

using namespace sinklab;
using namespace sinklab::probe;

namespace {
double harmonic(int64_t n) {
  double h = 0;
  for (int64_t k = 1; k <= n; ++k) h += 1.0 / static_cast<double>(k);
  return h;
}
template <class T>
Tensor<T> one_hot_attention(int64_t B, int64_t H, int64_t Tn, int64_t key) {
  Tensor<T> A = Tensor<T>::zeros({B, H, Tn, Tn});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tn; ++i) A(b, h, i, key) = T(1);
  return A;
}
// Every query spreads evenly over the keys it can see: A_ij = 1/(i+1) for j ≤ i.
template <class T>
Tensor<T> uniform_causal_attention(int64_t B, int64_t H, int64_t Tn) {
  Tensor<T> A = Tensor<T>::zeros({B, H, Tn, Tn});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tn; ++i)
        for (int64_t j = 0; j <= i; ++j) A(b, h, i, j) = T(1) / T(i + 1);
  return A;
}
template <class T>
double tol() {
  return std::is_same_v<T, float> ? 1e-6 : 1e-12;
}
}  // namespace

TEST_CASE_TEMPLATE("attention sink: one-hot attention on key 0 is a perfect sink", T, float, double) {
  const auto A = one_hot_attention<T>(2, 3, 10, 0);
  const auto attn = attn_to_key(A, 0);
  REQUIRE(attn.heads() == 3);
  for (double v : attn.values) CHECK(v == doctest::Approx(1.0));
  const auto score = sink_score(A);
  for (int64_t h = 0; h < 3; ++h) {
    CHECK(score.score[h] == doctest::Approx(1.0));
    CHECK(score.key[h] == 0);
  }
  const auto rate = sink_rate(A);
  CHECK(rate.rate == 1.0);
  CHECK(rate.window == 10);
  CHECK(rate.alpha.mean() == doctest::Approx(1.0));
  const auto mass = column_mass(A, 0);
  CHECK(mass.mass.mean() == doctest::Approx(1.0));
  CHECK(mass.second_moment.mean() == doctest::Approx(1.0));
  // Nothing attends to key 1.
  CHECK(attn_to_key(A, 1).max() == 0.0);
  CHECK(sink_rate(A, 1).rate == 0.0);
}

TEST_CASE_TEMPLATE("attention sink: uniform causal attention gives the harmonic-number values", T, float, double) {
  const int64_t Tn = 8;
  const auto A = uniform_causal_attention<T>(2, 2, Tn);
  const double HT = harmonic(Tn);
  CHECK(std::abs(attn_to_key(A, 0).mean() - HT / Tn) < tol<T>());
  const auto abar = key_attention_means(A);
  for (int64_t j = 0; j < Tn; ++j) CHECK(std::abs(abar(1, j) - (HT - harmonic(j)) / Tn) < tol<T>());
  const auto score = sink_score(A);
  CHECK(score.key[0] == 0);
  CHECK(std::abs(score.score.max() - HT / Tn) < tol<T>());

  // Leaving query 0 out: (H_T − 1) / (T − 1), which is what uniform_first_key_attention says.
  CHECK(std::abs(first_key_attention(A).mean() - (HT - 1.0) / (Tn - 1)) < tol<T>());
  CHECK(std::abs(uniform_first_key_attention(Tn) - (HT - 1.0) / (Tn - 1)) < 1e-12);
  CHECK(uniform_first_key_attention(1) == 0.0);
  // A perfect sink reads 1 either way.
  CHECK(std::abs(first_key_attention(one_hot_attention<T>(1, 2, Tn, 0)).min() - 1.0) < tol<T>());

  // α_0 = H_8 / 8 ≈ 0.3397: a sink at ε = 0.3, not at ε = 0.35.
  CHECK(std::abs(sink_rate(A, 0).alpha[0] - HT / Tn) < tol<T>());
  CHECK(sink_rate(A, 0, 0.3).rate == 1.0);
  CHECK(sink_rate(A, 0, 0.35).rate == 0.0);

  // M̄_2 = (H_T − H_2)/(T − 2), S̄_2 = Σ_{i=2}^{T−1} (i+1)^−2 / (T − 2).
  const auto mass = column_mass(A, 2);
  double sq = 0;
  for (int64_t i = 2; i < Tn; ++i) sq += 1.0 / double((i + 1) * (i + 1));
  CHECK(std::abs(mass.mass[0] - (HT - harmonic(2)) / (Tn - 2)) < tol<T>());
  CHECK(std::abs(mass.second_moment[1] - sq / (Tn - 2)) < tol<T>());
}

TEST_CASE("sink rate: the window holds T_eps queries starting at s") {
  // T = 100 > T_eps = 64: α_0 averages queries 0..63 only, H_64/64 ≈ 0.074 (not H_100/100).
  const auto A = uniform_causal_attention<double>(1, 1, 100);
  const auto r = sink_rate(A, 0, 0.3, 64);
  CHECK(r.window == 64);
  CHECK(r.alpha[0] == doctest::Approx(harmonic(64) / 64).epsilon(1e-12));
  CHECK(r.rate == 0.0);
  // Window starting at s = 90 is cut at T: queries 90..99.
  const auto r90 = sink_rate(A, 90, 0.3, 64);
  CHECK(r90.window == 10);
  CHECK(r90.alpha[0] == doctest::Approx((harmonic(100) - harmonic(90)) / 10).epsilon(1e-12));
  // One sink head out of two.
  auto mixed = Tensor<double>::zeros({1, 2, 100, 100});
  for (int64_t i = 0; i < 100; ++i) {
    mixed(0, 0, i, 0) = 1.0;
    for (int64_t j = 0; j <= i; ++j) mixed(0, 1, i, j) = 1.0 / double(i + 1);
  }
  CHECK(sink_rate(mixed).rate == 0.5);
  CHECK_THROWS_AS(sink_rate(mixed, 0, 0.3, 0), Error);
}

TEST_CASE("attn_to_key: a query mask picks the query set, per sequence or shared") {
  const auto A = uniform_causal_attention<double>(2, 1, 6);
  // Shared [T] mask: queries 0 and 3 → (1 + 1/4) / 2.
  auto shared = Tensor<uint8_t>::zeros({6});
  shared(0) = 1;
  shared(3) = 1;
  CHECK(attn_to_key(A, 0, shared)[0] == doctest::Approx(0.625));
  // Per-sequence [B, T] mask: query 1 in sequence 0, queries 4, 5 in sequence 1.
  auto per_seq = Tensor<int>::zeros({2, 6});
  per_seq(0, 1) = 1;
  per_seq(1, 4) = 1;
  per_seq(1, 5) = 1;
  CHECK(attn_to_key(A, 0, per_seq)[0] == doctest::Approx((0.5 + 0.2 + 1.0 / 6) / 3));
  CHECK_THROWS_WITH_AS(attn_to_key(A, 0, Tensor<uint8_t>::zeros({6})), doctest::Contains("selects no query"), Error);
  CHECK_THROWS_WITH_AS(attn_to_key(A, 0, Tensor<uint8_t>::ones({5})), doctest::Contains("[2, 6] or [6]"), Error);
  CHECK_THROWS_WITH_AS(attn_to_key(A, 6), doctest::Contains("key index 6"), Error);
  CHECK_THROWS_WITH_AS(delta_logit(Tensor<double>::zeros({1, 1, 4, 5})), doctest::Contains("not square"), Error);
  // Extra keys (S > T, e.g. registers at keys T..S−1): every query on the last key.
  auto reg = Tensor<double>::zeros({1, 1, 4, 6});
  for (int64_t i = 0; i < 4; ++i) reg(0, 0, i, 5) = 1.0;
  CHECK(sink_score(reg).key[0] == 5);
  CHECK(attn_to_key(reg, 5)[0] == 1.0);
  CHECK_THROWS_WITH_AS(sink_rate(reg, 5), doctest::Contains("no query"), Error);
  CHECK_THROWS_WITH_AS(sink_score(Tensor<double>::zeros({4, 4})), doctest::Contains("expected rank 4"), Error);
}

TEST_CASE_TEMPLATE("delta_logit: sink logit against the mean of the other visible keys", T, float, double) {
  // logit(i, 0) = 10, logit(i, j) = j otherwise; the masked upper triangle is -inf.
  const int64_t Tn = 7;
  auto L = Tensor<T>::full({1, 2, Tn, Tn}, -std::numeric_limits<T>::infinity());
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < Tn; ++i)
      for (int64_t j = 0; j <= i; ++j) L(0, h, i, j) = j == 0 ? T(10) : T(j);
  // Default: other keys j = 1..i−1 (mean i/2), queries i = 2..T−1.
  double expect = 0;
  for (int64_t i = 2; i < Tn; ++i) expect += 10.0 - i / 2.0;
  expect /= double(Tn - 2);
  const auto d = delta_logit(L, 0);
  CHECK(std::isfinite(d.mean()));
  CHECK(d[0] == doctest::Approx(expect));
  CHECK(d[1] == doctest::Approx(expect));
  // With the diagonal: other keys j = 1..i (mean (i+1)/2), queries i = 1..T−1.
  double expect_diag = 0;
  for (int64_t i = 1; i < Tn; ++i) expect_diag += 10.0 - (i + 1) / 2.0;
  expect_diag /= double(Tn - 1);
  CHECK(delta_logit(L, 0, true)[0] == doctest::Approx(expect_diag));
  // Query mask: only query 4 → 10 − 2.
  auto mask = Tensor<uint8_t>::zeros({Tn});
  mask(4) = 1;
  CHECK(delta_logit(L, 0, mask)[0] == doctest::Approx(8.0));
  // A non-zero sink position: s = 2, query 5 sees others {0, 1, 3, 4}.
  mask.fill(0);
  mask(5) = 1;
  CHECK(delta_logit(L, 2, mask)[1] == doctest::Approx(2.0 - (10.0 + 1 + 3 + 4) / 4));
  CHECK_THROWS_WITH_AS(delta_logit(Tensor<T>::zeros({1, 1, 2, 2}), 0), doctest::Contains("no query"), Error);
}
