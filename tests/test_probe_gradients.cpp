#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/core/rng.hpp"
#include "sinklab/probe/gradients.hpp"

using namespace sinklab;
using namespace sinklab::probe;

TEST_CASE_TEMPLATE("token_grad_norms: per-position norms averaged over batch and heads", T, float, double) {
  // [B = 2, H = 2, T = 3, d = 2]: token 0 gets (3, 4) everywhere, token 1 gets (0, b + h), token 2 zero.
  auto g = Tensor<T>::zeros({2, 2, 3, 2});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h) {
      g(b, h, 0, 0) = T(3);
      g(b, h, 0, 1) = T(4);
      g(b, h, 1, 1) = T(-(b + h));
    }
  const auto n = token_grad_norms(g);
  REQUIRE(n.shape() == Shape{3});
  CHECK(n(0) == doctest::Approx(5.0));
  CHECK(n(1) == doctest::Approx((0 + 1 + 1 + 2) / 4.0));
  CHECK(n(2) == 0.0);
  // [B, T, D] residual-stream gradients.
  const auto r = token_grad_norms(g.select(1, 0).contiguous().view({2, 3, 2}));
  CHECK(r(1) == doctest::Approx(0.5));
  CHECK_THROWS_WITH_AS(token_grad_norms(Tensor<T>::zeros({3, 2})), doctest::Contains("[B, T, D]"), Error);
}

TEST_CASE_TEMPLATE("branch ratios: Bloat, Compress and Change on hand-built gradients", T, float, double) {
  // B = 2, T = 2, D = 2. Per token (batch 0; batch 1 is the same times 2, which the ratios ignore):
  //   t = 0: ∇h_{+1/2} = (1, 0), ∇h̃ = (0, 10), ∇h = (1, 0.5) → Bloat 10, Compress 0.05, Change √1.25
  //   t = 1: ∇h_{+1/2} = (0, 2), ∇h̃ = (3, 4),  ∇h = (3, 2)   → Bloat 2.5, Compress 0.6, Change √13/2
  BranchGradients<T> g;
  g.after = Tensor<T>::from({2, 2, 2}, {T(1), T(0), T(0), T(2), T(2), T(0), T(0), T(4)});
  g.normed_input = Tensor<T>::from({2, 2, 2}, {T(0), T(10), T(3), T(4), T(0), T(20), T(6), T(8)});
  g.input = Tensor<T>::from({2, 2, 2}, {T(1), T(0.5), T(3), T(2), T(2), T(1), T(6), T(4)});
  const auto r = branch_ratios(g);  // ∇r left undefined: it is ∇h_{+1/2}
  CHECK(r.bloat(0) == doctest::Approx(10.0));
  CHECK(r.bloat(1) == doctest::Approx(2.5));
  CHECK(r.compress(0) == doctest::Approx(0.05));
  CHECK(r.compress(1) == doctest::Approx(0.6));
  CHECK(r.change(0) == doctest::Approx(std::sqrt(1.25)));
  CHECK(r.change(1) == doctest::Approx(std::sqrt(13.0) / 2));
  // An explicit ∇r is used for Bloat only.
  g.output = Tensor<T>::full({2, 2, 2}, T(0));
  g.output(0, 0, 0) = T(2);  // token 0: ‖∇r‖ = 2 in batch 0, 0 in batch 1 → mean 1; ‖∇h̃‖ mean 15
  const auto r2 = branch_ratios(g);
  CHECK(r2.bloat(0) == doctest::Approx(15.0));
  CHECK(std::isinf(r2.bloat(1)));
  CHECK(r2.change(0) == doctest::Approx(r.change(0)));
  // Batch aggregation: norms are averaged over the batch before dividing.
  BranchGradients<T> a;
  a.after = Tensor<T>::from({2, 1, 1}, {T(1), T(3)});
  a.normed_input = Tensor<T>::from({2, 1, 1}, {T(10), T(10)});
  a.input = Tensor<T>::from({2, 1, 1}, {T(1), T(3)});
  CHECK(branch_ratios(a).bloat(0) == doctest::Approx(5.0));  // 10 / mean(1, 3), not mean(10, 10/3)
  CHECK(branch_ratios(a).compress(0) == 0.0);
  a.input = Tensor<T>::zeros({2, 2, 1});
  CHECK_THROWS_WITH_AS(branch_ratios(a), doctest::Contains("∇h (input)"), Error);
}

TEST_CASE("branch ratios: an RMSNorm branch compresses in inverse proportion to the activation norm") {
  // h̃ = RMSNorm(h) (ε = 0, γ = 1), r = h̃ W, L = ⟨c, h + r⟩: ∇h_{+1/2} = ∇r = c, ∇h̃ = W c,
  // ∇h = c + J_rms(h)ᵀ ∇h̃ with J_rms(h) = (I − h hᵀ / (D rms²)) / rms. Scaling h by 10 divides
  // Compress by 10 (Theorem 2 of the gradient-sinks paper) and leaves Bloat unchanged.
  Rng rng(8);
  const int64_t D = 16;
  const auto W = rng.normal<double>({D, D});
  const auto c = rng.normal<double>({D});
  const auto h0 = rng.normal<double>({D});
  auto branch = [&](double scale) {
    BranchGradients<double> g;
    g.after = Tensor<double>::zeros({1, 1, D});
    g.normed_input = Tensor<double>::zeros({1, 1, D});
    g.input = Tensor<double>::zeros({1, 1, D});
    std::vector<double> h(D);
    double ms = 0;
    for (int64_t i = 0; i < D; ++i) ms += (h[i] = scale * h0(i)) * h[i];
    const double rms = std::sqrt(ms / D);
    std::vector<double> gt(D, 0.0);
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < D; ++j) gt[i] += W(i, j) * c(j);
    double hg = 0;
    for (int64_t i = 0; i < D; ++i) hg += h[i] * gt[i];
    for (int64_t i = 0; i < D; ++i) {
      g.after(0, 0, i) = c(i);
      g.normed_input(0, 0, i) = gt[i];
      g.input(0, 0, i) = c(i) + (gt[i] - h[i] * hg / (D * rms * rms)) / rms;
    }
    return std::pair{branch_ratios(g), rms};
  };
  const auto [r1, rms1] = branch(1.0);
  const auto [r10, rms10] = branch(10.0);
  CHECK(r10.compress(0) == doctest::Approx(r1.compress(0) / 10).epsilon(1e-10));
  CHECK(r10.bloat(0) == doctest::Approx(r1.bloat(0)).epsilon(1e-12));
  CHECK(r1.compress(0) <= 1.0 / rms1 + 1e-12);  // ‖J_rms‖_op ≤ 1 / rms(h)
}
