#include <doctest/doctest.h>

#include <cmath>

#include "sinklab/core/rng.hpp"
#include "sinklab/quant/smoothquant.hpp"

using namespace sinklab;
using namespace sinklab::quant;

namespace {
template <class T>
std::vector<double> matmul(const Tensor<T>& X, const Tensor<T>& W) {
  const int64_t N = X.size(0), C = X.size(1), M = W.size(1);
  std::vector<double> y(static_cast<std::size_t>(N * M), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t m = 0; m < M; ++m) y[n * M + m] += double(X(n, c)) * double(W(c, m));
  return y;
}
}  // namespace

TEST_CASE_TEMPLATE("SmoothQuant: s = max|X|^α / max|W|^(1−α) and X·W is preserved", T, float, double) {
  Rng rng(6);
  auto X = rng.normal<T>({64, 16});
  for (int64_t n = 0; n < 64; ++n) X(n, 5) *= T(100);  // an outlier channel
  const auto W = rng.normal<T>({16, 8}, T(0), T(0.1));
  const auto sm = smooth(X, W, 0.5);
  REQUIRE(sm.scales.size() == 16);
  const auto ax = channel_absmax(X), aw = weight_input_absmax(W);
  for (int64_t j = 0; j < 16; ++j) {
    CHECK(sm.scales[j] == doctest::Approx(std::sqrt(ax[j]) / std::sqrt(aw[j])));
    // α = 0.5 balances the two maxima: max|X'_j| = max|W'_j| = √(max|X_j| · max|W_j|).
    CHECK(channel_absmax(sm.X)[j] == doctest::Approx(std::sqrt(ax[j] * aw[j])).epsilon(1e-6));
    CHECK(weight_input_absmax(sm.W)[j] == doctest::Approx(std::sqrt(ax[j] * aw[j])).epsilon(1e-6));
  }
  CHECK(sm.scales[5] > 5 * sm.scales[0]);  // the outlier channel is divided the most
  const auto y0 = matmul(X, W), y1 = matmul(sm.X, sm.W);
  double ymax = 0, err = 0;
  for (std::size_t i = 0; i < y0.size(); ++i) {
    ymax = std::max(ymax, std::abs(y0[i]));
    err = std::max(err, std::abs(y0[i] - y1[i]));
  }
  CHECK(err <= 1e-5 * ymax);
  // α moves the balance: α = 1 puts everything on the weights (max|X'_j| = 1).
  const auto all_w = smooth(X, W, 1.0);
  CHECK(channel_absmax(all_w.X)[3] == doctest::Approx(1.0));
}

TEST_CASE("SmoothQuant: zero channels, PyTorch-layout weights and shape errors") {
  auto s = smoothing_scales({4.0, 0.0, 9.0}, {1.0, 2.0, 0.0});
  CHECK(s[0] == doctest::Approx(2.0));
  CHECK(s[1] == 1.0);
  CHECK(s[2] == 1.0);
  CHECK(smoothing_scales({1e-20}, {1e10})[0] == 1e-5);  // floored
  Rng rng(7);
  const auto X = rng.normal<double>({2, 5, 4});  // leading axes flattened to tokens
  const auto Wpt = rng.normal<double>({3, 4});     // PyTorch [out, in]
  const auto sm = smooth(X, Wpt.transpose(0, 1));
  const auto y0 = matmul(X.view({10, 4}), Wpt.transpose(0, 1));
  const auto y1 = matmul(sm.X.view({10, 4}), sm.W);
  for (std::size_t i = 0; i < y0.size(); ++i) CHECK(y1[i] == doctest::Approx(y0[i]).epsilon(1e-12));
  CHECK_THROWS_WITH_AS(smooth(X, Wpt), doctest::Contains("channel count"), Error);
  CHECK_THROWS_WITH_AS(smoothing_scales({1.0}, {1.0, 2.0}), doctest::Contains("1 activation channels vs 2"), Error);
  CHECK_THROWS_WITH_AS(smoothing_scales({1.0}, {1.0}, 1.5), doctest::Contains("alpha"), Error);
}
