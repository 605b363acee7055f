#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/core/rng.hpp"
#include "sinklab/probe/massive_activation.hpp"
#include "sinklab/probe/outlier_stats.hpp"
#include "sinklab/probe/residual_sinks.hpp"
#include "sinklab/probe/token_norms.hpp"
#include "sinklab/probe/value_norms.hpp"

using namespace sinklab;
using namespace sinklab::probe;

TEST_CASE_TEMPLATE("kurtosis: Gaussian ≈ 3, uniform ≈ 1.8, hand-built values exact", T, float, double) {
  Rng rng(7);
  const auto g = rng.normal<T>({400000}, T(2), T(3));
  CHECK(kurtosis(g) == doctest::Approx(3.0).epsilon(0.02));
  const auto u = rng.uniform<T>({400000}, T(-1), T(5));
  CHECK(kurtosis(u) == doctest::Approx(1.8).epsilon(0.02));
  // ±1: μ = 0, σ² = 1, mean((x−μ)⁴) = 1 → 1 / (1 + 1e-6).
  CHECK(kurtosis(Tensor<T>::from({2, 2}, {T(1), T(-1), T(-1), T(1)})) == doctest::Approx(1.0 / (1.0 + 1e-6)).epsilon(1e-12));
  // Constant: no spread, 0 / (0 + 1e-6).
  CHECK(kurtosis(Tensor<T>::full({5}, T(4))) == 0.0);
  // One outlier among n zeros-ish: x = (n−1 zeros, one a): kurtosis = (n² − 3n + 3)/(n − 1) for large a.
  auto spike = Tensor<T>::zeros({10});
  spike(3) = T(100);
  CHECK(kurtosis(spike) == doctest::Approx((100.0 - 30 + 3) / 9).epsilon(1e-6));
}

TEST_CASE("OutlierAccumulator: per-module inf-norm max/mean over samples, Max inf norm, Avg kurtosis") {
  OutlierAccumulator acc;
  acc.add("attn.out", Tensor<float>::from({2, 3}, {1.f, -5.f, 2.f, 3.f, 0.f, 0.f}));  // samples: 5, 3
  acc.add("mlp.out", Tensor<double>::from({1, 2}, {10.0, -10.0}));                  // sample: 10
  acc.add("attn.out", Tensor<float>::from({1, 3}, {0.f, 0.f, -7.f}));                // sample: 7
  const auto mods = acc.modules();
  REQUIRE(mods.size() == 2);
  CHECK(mods[0].name == "attn.out");
  CHECK(mods[0].samples == 3);
  CHECK(mods[0].max_inf_norm == 7.0);
  CHECK(mods[0].mean_inf_norm == doctest::Approx(5.0));
  CHECK(mods[1].mean_inf_norm == 10.0);
  CHECK(acc.max_inf_norm() == 10.0);  // max over modules of the mean, not of the max
  const double k_attn = (kurtosis(std::vector<float>{1.f, -5.f, 2.f}.data(), 3) +
                         kurtosis(std::vector<float>{3.f, 0.f, 0.f}.data(), 3) +
                         kurtosis(std::vector<float>{0.f, 0.f, -7.f}.data(), 3)) / 3;
  const double k_mlp = kurtosis(std::vector<double>{10.0, -10.0}.data(), 2);
  CHECK(mods[0].mean_kurtosis == doctest::Approx(k_attn));
  CHECK(acc.avg_kurtosis() == doctest::Approx((k_attn + k_mlp) / 2));
  // Each sample is flattened: a [B, T, D] output contributes B samples of T·D values.
  OutlierAccumulator acc3;
  auto x = Tensor<double>::zeros({2, 3, 4});
  x(0, 2, 1) = -9.0;
  x(1, 0, 3) = 4.0;
  acc3.add("block", x);
  CHECK(acc3.modules()[0].samples == 2);
  CHECK(acc3.max_inf_norm() == doctest::Approx(6.5));
  CHECK_THROWS_WITH_AS(OutlierAccumulator{}.max_inf_norm(), doctest::Contains("no module output"), Error);
  CHECK_THROWS_WITH_AS(acc.add("x", Tensor<float>::zeros({0, 3})), doctest::Contains("'x'"), Error);
}

TEST_CASE("massive_activation: top-1 |x| over the median, where it sits, and how many sequences share its token") {
  // [3, 4, 5]: entries ±1 except one 40 (sequence 0, token 2, channel 3) and one 30 (sequence 1,
  // token 2, channel 0); sequence 2's largest entry is a 2 at token 1 (its first occurrence).
  auto x = Tensor<float>::full({3, 4, 5}, 1.0f);
  for (int64_t k = 0; k < x.numel(); k += 2) x.data()[k] = -1.0f;
  x(0, 2, 3) = 40.0f;
  x(1, 2, 0) = -30.0f;
  x(2, 1, 4) = 2.0f;
  const MassiveActivation m = massive_activation(x);
  CHECK(m.top == 40.0);
  CHECK(m.median == 1.0);
  CHECK(m.ratio == 40.0);
  CHECK(m.token == 2);
  CHECK(m.channel == 3);
  CHECK(m.token_share == doctest::Approx(2.0 / 3));
  CHECK(massive_activation(Tensor<double>::zeros({2, 3})).ratio == 0.0);
  CHECK_THROWS_WITH_AS(massive_activation(Tensor<float>::zeros({4})), doctest::Contains("[..., T, D]"), Error);
}

TEST_CASE("DimensionMaxAbs: residual-sink dimensions over batches") {
  Rng rng(3);
  auto a = rng.normal<double>({2, 5, 8});
  auto b = rng.normal<double>({4, 8});
  a(1, 0, 6) = -300.0;  // a massive activation on token 0 in dim 6
  b(2, 3) = 50.0;
  DimensionMaxAbs acc;
  acc.add(a);
  acc.add(b);
  const auto top = acc.top(2);
  REQUIRE(top.size() == 2);
  CHECK(top[0].dim == 6);
  CHECK(top[0].value == 300.0);
  CHECK(top[1].dim == 3);
  CHECK(top[1].value == 50.0);
  CHECK(acc.max() == 300.0);
  CHECK(acc.top(100).size() == 8);
  CHECK(max_abs_per_dim(a)(6) == 300.0);
  CHECK_THROWS_WITH_AS(acc.add(Tensor<double>::zeros({2, 7})), doctest::Contains("last axis 7"), Error);
}

TEST_CASE("residual_sinks: dimensions large at most tokens, not at a few; inf_norm of a tensor") {
  // [2, 5, 4]: dimension 2 is 10 at every token (a residual sink); dimension 0 has one spike of 100
  // (a massive activation at one token, not a sink); the rest are 1 (median 1).
  Tensor<float> x = Tensor<float>::ones({2, 5, 4});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t) x(b, t, 2) = (t % 2) ? -10.f : 10.f;
  x(1, 3, 0) = 100.f;
  const probe::ResidualSinks r = probe::residual_sinks(x, 5.0);
  CHECK(r.median == 1.0);
  CHECK(r.dims == std::vector<int64_t>{2});
  CHECK(r.top == 2);
  CHECK(r.top_ratio == doctest::Approx(10.0));
  // Every dimension's ratio: the spike does not move dimension 0's median.
  CHECK(r.ratios == std::vector<double>{1.0, 1.0, 10.0, 1.0});
  CHECK(probe::residual_sinks(x, 20.0).dims.empty());
  CHECK(probe::inf_norm(x) == 100.0);
  CHECK(probe::inf_norm(x.slice(0, 0, 1)) == 10.0);  // a view: the spike is in sequence 1
  CHECK_THROWS_WITH_AS(probe::residual_sinks(x, 0.0), doctest::Contains("ratio must be positive"), Error);
}

TEST_CASE_TEMPLATE("token norms: token 0 against tokens 1-15", T, float, double) {
  auto x = Tensor<T>::zeros({2, 20, 3});
  for (int64_t b = 0; b < 2; ++b) {
    x(b, 0, 0) = T(b == 0 ? 30 : 50);  // token 0: norms 30 and 50 → mean 40
    for (int64_t t = 1; t < 20; ++t) {
      x(b, t, 1) = T(3);
      x(b, t, 2) = T(4 + (t == 7 ? 1 : 0) * 8);  // token 7: ‖(3, 12)‖ = √153
    }
  }
  const auto n = token_norms(x);
  CHECK(n(0) == doctest::Approx(40.0));
  CHECK(n(1) == doctest::Approx(5.0));
  const auto e = early_token_norms(x);
  CHECK(e.token0 == doctest::Approx(40.0));
  CHECK(e.first == 1);
  CHECK(e.last == 15);
  CHECK(e.rest_max == doctest::Approx(std::sqrt(153.0)));
  CHECK(e.rest_mean == doctest::Approx((14 * 5.0 + std::sqrt(153.0)) / 15));
  // Shorter sequences cut the range at T − 1.
  CHECK(early_token_norms(x.slice(1, 0, 4)).last == 3);
  CHECK_THROWS_AS(early_token_norms(x.slice(1, 0, 1)), Error);
}

TEST_CASE_TEMPLATE("value norms: ‖v‖, ‖W_O v‖ and the value-norm ratio", T, float, double) {
  // B = 1, H = 2, T = 3, d_h = 2; W_O [4, 3] in the y·W convention.
  auto V = Tensor<T>::zeros({1, 2, 3, 2});
  const T vals[2][3][2] = {{{T(0.1), T(0)}, {T(3), T(4)}, {T(0), T(5)}}, {{T(1), T(0)}, {T(0), T(1)}, {T(1), T(1)}}};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t k = 0; k < 2; ++k) V(0, h, t, k) = vals[h][t][k];
  const auto vn = value_norms(V);
  CHECK(vn(0, 1) == doctest::Approx(5.0));
  CHECK(vn(1, 2) == doctest::Approx(std::sqrt(2.0)));
  // Raw ratio for head 0, sink 0: 0.1 / mean(5, 5) = 0.02.
  CHECK(value_norm_ratio(V, 0)[0] == doctest::Approx(0.02));
  // W_O: head 0 rows map (a, b) → (2a, 0, 0); head 1 rows map (a, b) → (0, a, b).
  auto W = Tensor<T>::zeros({4, 3});
  W(0, 0) = T(2);
  W(2, 1) = T(1);
  W(3, 2) = T(1);
  const auto on = output_value_norms(V, W);
  CHECK(on(0, 0) == doctest::Approx(0.2));
  CHECK(on(0, 1) == doctest::Approx(6.0));  // only the first component survives W_O
  CHECK(on(0, 2) == doctest::Approx(0.0));
  CHECK(on(1, 2) == doctest::Approx(std::sqrt(2.0)));
  const auto ratio = value_norm_ratio(V, W, 0);
  CHECK(ratio[0] == doctest::Approx(0.2 / 3.0));
  CHECK(ratio[1] == doctest::Approx(1.0 / ((1.0 + std::sqrt(2.0)) / 2)));
  // Per-sequence norm tables [B, H, T] are averaged over the batch first.
  auto table = Tensor<T>::from({2, 1, 3}, {T(1), T(4), T(2), T(3), T(4), T(6)});  // batch mean (2, 4, 4)
  CHECK(norm_ratio_to_others(table, 0)[0] == doctest::Approx(0.5));
  // A PyTorch-layout weight [D, H·d_h] goes in transposed (a view).
  CHECK(output_value_norms(V, W.transpose(0, 1).contiguous().transpose(0, 1))(0, 1) == doctest::Approx(6.0));
  CHECK_THROWS_WITH_AS(output_value_norms(V, W.transpose(0, 1)), doctest::Contains("transpose"), Error);

  // At each sequence's own sink: two sequences (the second with head 1's values doubled), sinks
  // per sequence and head. Sequence 0: head 0 at token 0 (0.2 / 3), head 1 at token 2
  // (√2 / mean(1, 1)); sequence 1: head 0 at token 1 (6 / mean(0.2, 0)), head 1 at token 0
  // (2 / mean(2, 2√2)).
  auto V2 = Tensor<T>::zeros({2, 2, 3, 2});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t k = 0; k < 2; ++k) V2(0, h, t, k) = vals[h][t][k], V2(1, h, t, k) = T(h + 1) * vals[h][t][k];
  const auto sinks = Tensor<int64_t>::from({2, 2}, {0, 2, 1, 0});
  const auto at = value_norm_ratio_at(V2, W, sinks);
  CHECK(at[0] == doctest::Approx((0.2 / 3.0 + 6.0 / 0.1) / 2));
  CHECK(at[1] == doctest::Approx((std::sqrt(2.0) / 1.0 + 2.0 / (1.0 + std::sqrt(2.0))) / 2));
  CHECK_THROWS_WITH_AS(value_norm_ratio_at(V2, W, Tensor<int64_t>::from({2, 2}, {0, 3, 0, 0})),
                       doctest::Contains("is not a token"), Error);
  CHECK_THROWS_WITH_AS(value_norm_ratio_at(V2, W, Tensor<int64_t>::from({1, 2}, {0, 0})), doctest::Contains("expected [2, H]"),
                       Error);
}
