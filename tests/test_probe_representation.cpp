#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/core/rng.hpp"
#include "sinklab/probe/head_update_rank.hpp"
#include "sinklab/probe/representation.hpp"
#include "sinklab/probe/spectral.hpp"

using namespace sinklab;
using namespace sinklab::probe;

namespace {
template <class T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) {
  Tensor<T> c = Tensor<T>::zeros({a.size(0), b.size(1)});
  for (int64_t i = 0; i < a.size(0); ++i)
    for (int64_t k = 0; k < a.size(1); ++k)
      for (int64_t j = 0; j < b.size(1); ++j) c(i, j) += a(i, k) * b(k, j);
  return c;
}
template <class T>
double rel_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}
}  // namespace

TEST_CASE_TEMPLATE("singular values: a rank-k matrix has k nonzero singular values", T, float, double) {
  Rng rng(11);
  for (int64_t k : {1, 3, 5}) {
    const auto M = matmul(rng.normal<T>({20, k}), rng.normal<T>({k, 12}));
    const auto s = singular_values(M);
    REQUIRE(s.size() == 12);
    for (std::size_t i = 1; i < s.size(); ++i) CHECK(s[i] <= s[i - 1]);
    int64_t nonzero = 0;
    for (double v : s) nonzero += v > 100 * rel_tol<T>() * s[0];
    CHECK(nonzero == k);
  }
  // diag(3, 4, 0) → 4, 3, 0.
  const auto d = singular_values(Tensor<T>::from({3, 3}, {T(3), T(0), T(0), T(0), T(4), T(0), T(0), T(0), T(0)}));
  CHECK(d[0] == doctest::Approx(4.0));
  CHECK(d[1] == doctest::Approx(3.0));
  CHECK(std::abs(d[2]) < 1e-12);
}

TEST_CASE_TEMPLATE("stable rank: rank-1 update is 1, identity is n, zero is 0", T, float, double) {
  // A one-hot attention matrix (every query on key 0) copies v_0 to every row: U = A V is rank 1.
  Rng rng(5);
  const int64_t Tn = 9, d = 4;
  auto A = Tensor<T>::zeros({Tn, Tn});
  for (int64_t i = 0; i < Tn; ++i) A(i, 0) = T(1);
  const auto U = matmul(A, rng.normal<T>({Tn, d}));
  CHECK(stable_rank(U) == doctest::Approx(1.0).epsilon(rel_tol<T>()));
  auto I = Tensor<T>::zeros({5, 5});
  for (int64_t i = 0; i < 5; ++i) I(i, i) = T(1);
  CHECK(stable_rank(I) == doctest::Approx(5.0).epsilon(rel_tol<T>()));
  // diag(3, 4): (9 + 16) / 16.
  CHECK(stable_rank(Tensor<T>::from({2, 2}, {T(3), T(0), T(0), T(4)})) == doctest::Approx(25.0 / 16));
  CHECK(stable_rank(Tensor<T>::zeros({3, 2})) == 0.0);
  // Batch [B, N, D]: mean over the batch (1 and 5 → 3).
  auto batch = Tensor<T>::zeros({2, 5, 5});
  for (int64_t i = 0; i < 5; ++i) {
    batch(0, i, 0) = T(i + 1);
    batch(1, i, i) = T(2);
  }
  CHECK(stable_rank(batch) == doctest::Approx(3.0).epsilon(rel_tol<T>()));
  CHECK_THROWS_WITH_AS(stable_rank(Tensor<T>::zeros({1, 2, 3, 4})), doctest::Contains("[B, N, D]"), Error);
}

TEST_CASE_TEMPLATE("head_update_stable_rank: a head copying one token is rank 1, others match the explicit product", T,
                   float, double) {
  // Two query heads share one value head (GQA). Head 0 sends every query to key 0 (U = 1 v_0ᵀ W_O,0:
  // rank 1); head 1 attends to itself (U = V W_O,1), checked against stable_rank of that product.
  Rng rng(11);
  const int64_t B = 2, H = 2, Tn = 6, dh = 3, D = 5;
  auto A = Tensor<T>::zeros({B, H, Tn, Tn});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tn; ++i) A(b, 0, i, 0) = T(1), A(b, 1, i, i) = T(1);
  const auto V = rng.normal<T>({B, 1, Tn, dh});
  const auto W = rng.normal<T>({H * dh, D});
  const PerHead r = head_update_stable_rank(A, V, W);
  REQUIRE(r.heads() == 2);
  CHECK(r[0] == doctest::Approx(1.0).epsilon(rel_tol<T>()));
  double expect = 0;
  for (int64_t b = 0; b < B; ++b) {
    auto vb = Tensor<T>::zeros({Tn, dh});
    auto w1 = Tensor<T>::zeros({dh, D});
    for (int64_t i = 0; i < Tn; ++i)
      for (int64_t k = 0; k < dh; ++k) vb(i, k) = V(b, 0, i, k);
    for (int64_t k = 0; k < dh; ++k)
      for (int64_t n = 0; n < D; ++n) w1(k, n) = W(dh + k, n);
    expect += stable_rank(matmul(vb, w1)) / double(B);
  }
  CHECK(r[1] > 1.2);
  CHECK(r[1] == doctest::Approx(expect).epsilon(10 * rel_tol<T>()));
  CHECK_THROWS_WITH_AS(head_update_stable_rank(A, V, rng.normal<T>({D, H * dh})), doctest::Contains("expected [6, D]"),
                       Error);
  CHECK_THROWS_WITH_AS(head_update_stable_rank(A, rng.normal<T>({B, 1, Tn + 1, dh}), W),
                       doctest::Contains("do not match attention"), Error);
}

TEST_CASE("qk_singular_values: per-head spectrum of W_Q,h W_K,hᵀ") {
  Rng rng(2);
  const int64_t D = 6, H = 2, dh = 2;
  auto Wq = rng.normal<double>({D, H * dh});
  auto Wk = rng.normal<double>({D, H * dh});
  // Head 1: a spectral spike, q and k both read the direction e_0 with gain 10.
  for (int64_t r = 0; r < D; ++r)
    for (int64_t c = dh; c < 2 * dh; ++c) Wq(r, c) = Wk(r, c) = 0.0;
  Wq(0, dh) = 10.0;
  Wk(0, dh) = 10.0;
  const auto sv = qk_singular_values(Wq, Wk, H);
  REQUIRE(sv.size() == 2);
  REQUIRE(sv[0].size() == static_cast<std::size_t>(D));
  // Head 0 against the explicit product.
  const auto theta0 = matmul(Wq.slice(1, 0, dh).contiguous(), Wk.slice(1, 0, dh).transpose(0, 1).contiguous());
  const auto ref = singular_values(theta0);
  for (int64_t i = 0; i < D; ++i) CHECK(sv[0][i] == doctest::Approx(ref[i]).epsilon(1e-10));
  CHECK(sv[0][dh] < 1e-10 * sv[0][0]);  // rank ≤ d_head
  CHECK(sv[1][0] == doctest::Approx(100.0));
  CHECK(sv[1][1] < 1e-12);
  // Grouped keys: both query heads read key head 0.
  const auto gqa = qk_singular_values(Wq, Wk.slice(1, 0, dh), H, 1);
  CHECK(gqa[0][0] == doctest::Approx(ref[0]));
  CHECK_THROWS_WITH_AS(qk_singular_values(Wq, Wk.slice(1, 0, 3), H), doctest::Contains("does not match W_Q"), Error);
}

TEST_CASE_TEMPLATE("mean pairwise cosine and cosine to the input embedding", T, float, double) {
  // Identical directions → 1; orthonormal tokens → 0; a token and its negation → −1.
  auto same = Tensor<T>::zeros({1, 4, 3});
  for (int64_t t = 0; t < 4; ++t) {
    same(0, t, 0) = T(t + 1);
    same(0, t, 2) = T(2 * (t + 1));
  }
  CHECK(mean_pairwise_cosine(same) == doctest::Approx(1.0));
  auto ortho = Tensor<T>::zeros({3, 3});
  for (int64_t t = 0; t < 3; ++t) ortho(t, t) = T(t + 2);
  CHECK(std::abs(mean_pairwise_cosine(ortho)) < 1e-7);
  auto opposite = Tensor<T>::from({2, 2}, {T(1), T(2), T(-1), T(-2)});
  CHECK(mean_pairwise_cosine(opposite) == doctest::Approx(-1.0));
  // Batch mean, zero vectors left out: sequence 0 = {e0, e0, 0} → 1; sequence 1 = {e0, e1, 0} → 0.
  auto mixed = Tensor<T>::zeros({2, 3, 2});
  mixed(0, 0, 0) = mixed(0, 1, 0) = T(1);
  mixed(1, 0, 0) = mixed(1, 1, 1) = T(1);
  CHECK(mean_pairwise_cosine(mixed) == doctest::Approx(0.5));
  // Brute force on random data.
  Rng rng(4);
  const auto X = rng.normal<T>({2, 5, 7});
  double brute = 0;
  for (int64_t b = 0; b < 2; ++b) {
    double s = 0;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        if (i == j) continue;
        double dot = 0, ni = 0, nj = 0;
        for (int64_t d = 0; d < 7; ++d) {
          dot += double(X(b, i, d)) * double(X(b, j, d));
          ni += double(X(b, i, d)) * double(X(b, i, d));
          nj += double(X(b, j, d)) * double(X(b, j, d));
        }
        s += dot / std::sqrt(ni * nj);
      }
    brute += s / 20;
  }
  CHECK(mean_pairwise_cosine(X) == doctest::Approx(brute / 2).epsilon(1e-6));

  auto E = rng.normal<T>({2, 5, 7});
  CHECK(cosine_to_embedding(E, E) == doctest::Approx(1.0));
  auto neg = E.clone();
  for (int64_t i = 0; i < neg.numel(); ++i) neg.data()[i] = T(-3) * neg.data()[i];
  CHECK(cosine_to_embedding(neg, E) == doctest::Approx(-1.0));
  CHECK_THROWS_WITH_AS(cosine_to_embedding(E, X.slice(2, 0, 6)), doctest::Contains("same shape"), Error);
}

TEST_CASE_TEMPLATE("PCA core features: data on a k-dim subspace needs k components", T, float, double) {
  // Tokens x = μ + z·B with B three orthonormal directions in R^10 (a rotation of e0, e1, e2) and
  // z ~ N(0, diag(3², 2², 1²)): variance fractions ≈ 9/14, 4/14, 1/14.
  Rng rng(9);
  const int64_t N = 4000, D = 10;
  auto X = Tensor<T>::zeros({4, N / 4, D});
  const double c = std::cos(0.7), s = std::sin(0.7);
  const double basis[3][10] = {{c, s, 0, 0, 0, 0, 0, 0, 0, 0}, {-s, c, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, c, 0, s, 0}};
  const double stds[3] = {3, 2, 1};
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < 3; ++k) {
      const double z = stds[k] * rng.normal();
      for (int64_t d = 0; d < D; ++d) X.data()[r * D + d] += T(z * basis[k][d] + (k == 0 ? 5.0 + d : 0.0));
    }
  const auto p = pca_core_features(X);
  CHECK(p.threshold == 0.99);
  CHECK(p.components == 3);
  REQUIRE(p.explained_variance_ratio.size() == static_cast<std::size_t>(D));
  CHECK(p.explained_variance_ratio[0] == doctest::Approx(9.0 / 14).epsilon(0.05));
  CHECK(p.explained_variance_ratio[2] == doctest::Approx(1.0 / 14).epsilon(0.1));
  CHECK(p.explained_variance_ratio[3] < 1e-6);
  // Threshold 1 asks for all the variance: exactly 3 in double; float round-off may add tiny ones.
  if constexpr (std::is_same_v<T, double>) CHECK(pca_core_features(X, 1.0).components == 3);
  else CHECK(pca_core_features(X, 1.0).components >= 3);
  CHECK(pca_core_features(X, 0.9).components == 2);
  CHECK(pca_core_features(X, 0.5).components == 1);
  CHECK(pca_core_features(Tensor<T>::full({6, 4}, T(2))).components == 0);  // no variance at all
  CHECK_THROWS_WITH_AS(pca_core_features(X, 0.0), doctest::Contains("(0, 1]"), Error);
}
