#include <doctest/doctest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/core/rng.hpp"
#include "sinklab/core/xsimd.hpp"
#include "sinklab/quant/int8_weight.hpp"
#include "sinklab/quant/minmax_observer.hpp"
#include "sinklab/quant/rounding.hpp"
#include "sinklab/quant/uniform.hpp"

using namespace sinklab;
using namespace sinklab::quant;

TEST_CASE("round_half_even: ties go to the even integer") {
  CHECK(round_half_even(0.5) == 0.0);
  CHECK(round_half_even(1.5) == 2.0);
  CHECK(round_half_even(2.5) == 2.0);
  CHECK(round_half_even(-0.5) == 0.0);
  CHECK(round_half_even(-1.5) == -2.0);
  CHECK(round_half_even(-2.5) == -2.0);
  CHECK(round_half_even(2.4999) == 2.0);
  CHECK(round_half_even(2.5001) == 3.0);
  CHECK(round_half_even(-7.6) == -8.0);
  CHECK(round_half_even(1e17 + 2) == 1e17 + 2);
  CHECK(round_half_even(4503599627370495.5) == 4503599627370496.0);  // the last half-integer a double holds
  CHECK(round_half_even(0.49999999999999994) == 0.0);
  CHECK(std::signbit(round_half_even(-0.4)));
  CHECK(round_half_even(INFINITY) == INFINITY);
  CHECK(std::isnan(round_half_even(double(NAN))));
  // A batch rounds each lane as a double does.
  using V = xsimd::batch<double>;
  alignas(64) double x[V::size], r[V::size];
  for (std::size_t i = 0; i < V::size; ++i) x[i] = -2.5 + static_cast<double>(i) * 0.75;
  round_half_even(V::load_aligned(x)).store_aligned(r);
  for (std::size_t i = 0; i < V::size; ++i) CHECK(r[i] == round_half_even(x[i]));
}

TEST_CASE_TEMPLATE("UniformQuantizer::quantize_row: the codes quantize() gives, ties and clamps included", T, float, double) {
  Rng rng(9);
  const UniformQuantizer q = UniformQuantizer::asymmetric(-1.3, 2.1, 8);
  std::vector<T> x;
  for (int i = 0; i < 1000; ++i) x.push_back(static_cast<T>(rng.normal() * 1.5));  // some beyond the range
  for (int c = -40; c < 300; ++c) x.push_back(static_cast<T>((c - q.zero_point + 0.5) * static_cast<double>(q.scale)));
  for (const int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(8), int64_t(17), static_cast<int64_t>(x.size())}) {
    std::vector<uint8_t> codes(static_cast<std::size_t>(n) + 1, 77);
    q.quantize_row(x.data(), n, codes.data());
    int wrong = 0;
    for (int64_t j = 0; j < n; ++j) wrong += codes[j] != q.quantize(static_cast<double>(x[j]));
    CHECK(wrong == 0);
    CHECK(codes[n] == 77);  // nothing written past n
  }
  // Symmetric int8 codes, and a NaN (qmin).
  const UniformQuantizer w = UniformQuantizer::symmetric(1.7, 8);
  std::vector<int8_t> sc(x.size());
  w.quantize_row(x.data(), static_cast<int64_t>(x.size()), sc.data());
  int wrong = 0;
  for (std::size_t j = 0; j < x.size(); ++j) wrong += sc[j] != w.quantize(static_cast<double>(x[j]));
  CHECK(wrong == 0);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  uint8_t code = 77;
  q.quantize_row(&nan, 1, &code);
  CHECK(code == q.qmin);
  // Another rounding mode would move ties: refused.
  REQUIRE(std::fesetround(FE_UPWARD) == 0);
  CHECK_THROWS_WITH_AS(q.quantize_row(x.data(), 4, sc.data()), doctest::Contains("rounding mode"), Error);
  std::fesetround(FE_TONEAREST);
}

TEST_CASE_TEMPLATE("fake_quantize and fake_quantize_mse: fake() element by element, in any rounding mode", T, float,
                   double) {
  Rng rng(11);
  const UniformQuantizer q = UniformQuantizer::asymmetric(-1.3, 2.1, 8);
  // Chunks of 512 and 8 lanes: sizes on both sides of their edges; ties, clamps and infinities.
  std::vector<T> all;
  for (int i = 0; i < 1500; ++i) all.push_back(static_cast<T>(rng.normal() * 1.5));
  for (int c = -40; c < 300; ++c)
    all.push_back(static_cast<T>((c - q.zero_point + 0.5) * static_cast<double>(q.scale)));
  all.push_back(std::numeric_limits<T>::infinity());
  all.push_back(-std::numeric_limits<T>::infinity());
  for (const int mode : {FE_TONEAREST, FE_UPWARD}) {
    REQUIRE(std::fesetround(mode) == 0);
    for (const std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(9), std::size_t(512), std::size_t(513),
                                std::size_t(1031), all.size()}) {
      CAPTURE(mode);
      CAPTURE(n);
      const std::vector<T> x(all.end() - static_cast<std::ptrdiff_t>(n), all.end());
      const Tensor<T> t = Tensor<T>::from({static_cast<int64_t>(n)}, x);
      const std::vector<T> f = fake_quantize(t, q).to_vector();
      int wrong = 0;
      double sum = 0;  // in element order: fake_quantize_mse sums in 8 lanes, so close, not equal
      for (std::size_t j = 0; j < n; ++j) {
        const T ref = static_cast<T>(q.fake(static_cast<double>(x[j])));
        wrong += f[j] != ref;
        const double e = static_cast<double>(x[j]) - static_cast<double>(ref);
        sum += e * e;
      }
      CHECK(wrong == 0);
      const double mse = fake_quantize_mse(t, q), ref = sum / static_cast<double>(n);
      if (std::isinf(ref)) {
        CHECK(std::isinf(mse));
      } else {
        CHECK(std::abs(mse - ref) <= 1e-13 * ref);
      }
    }
  }
  std::fesetround(FE_TONEAREST);
}

TEST_CASE("INT8 weights: the MSE range search chooses the same range on any thread count") {
  Rng rng(5);
  auto W = rng.normal<float>({96, 130}, 0.f, 0.05f);
  W(5, 9) = 1.2f;
  const int threads = num_threads();
  set_num_threads(1);
  const auto one = quantize_weight_mse(W, 8, 100);
  set_num_threads(std::max(threads, 3));
  const auto many = quantize_weight_mse(W, 8, 100);
  set_num_threads(threads);
  CHECK(one.mse == many.mse);  // bit for bit
  CHECK(one.clip_ratio == many.clip_ratio);
  CHECK(one.quantizer.scale == many.quantizer.scale);
  CHECK(one.values.to_vector() == many.values.to_vector());
  // The argmin, first of equals in the order k = 100, 99, …, 1.
  double best = INFINITY;
  int best_k = 0;
  for (int k = 100; k >= 1; --k) {
    const double e = fake_quantize_mse(W, UniformQuantizer::symmetric(k / 100.0 * 1.2, 8));
    if (e < best) best = e, best_k = k;
  }
  CHECK(one.clip_ratio == best_k / 100.0);
  CHECK(one.mse == best);
}

// Large enough to run on several threads. The rounding mode is per thread and the pool's workers
// round to nearest: under another mode the caller's arithmetic must reach every element and every
// candidate range. NaN stays NaN.
TEST_CASE("fake_quantize and the MSE range search on several threads: the caller's rounding mode, NaN kept") {
  Rng rng(13);
  const Tensor<float> x = rng.normal<float>({40000}, 0.f, 0.05f);
  Tensor<float> with_nan = x.clone();
  with_nan.data()[3] = std::numeric_limits<float>::quiet_NaN();
  with_nan.data()[39000] = std::numeric_limits<float>::quiet_NaN();
  const UniformQuantizer q = UniformQuantizer::asymmetric(-0.1, 0.13, 8);
  const int threads = num_threads();
  set_num_threads(std::max(threads, 3));
  for (const int mode : {FE_TONEAREST, FE_UPWARD}) {
    CAPTURE(mode);
    REQUIRE(std::fesetround(mode) == 0);
    const std::vector<float> f = fake_quantize(with_nan, q).to_vector();
    int wrong = 0;
    for (int64_t j = 0; j < with_nan.numel(); ++j) {
      const float v = with_nan.data()[j];
      if (v != v)
        wrong += f[static_cast<std::size_t>(j)] == f[static_cast<std::size_t>(j)];  // must be NaN
      else
        wrong += f[static_cast<std::size_t>(j)] != static_cast<float>(q.fake(static_cast<double>(v)));
    }
    CHECK(wrong == 0);
    CHECK(std::isnan(fake_quantize_mse(with_nan, q)));
    // Every candidate in the caller's mode: the search equals the argmin computed on this thread.
    const auto got = quantize_weight_mse(x, 8, 40);
    double best = INFINITY, absmax = 0;
    for (int64_t j = 0; j < x.numel(); ++j) absmax = std::max(absmax, std::abs(double(x.data()[j])));
    for (int k = 40; k >= 1; --k)
      best = std::min(best, fake_quantize_mse(x, UniformQuantizer::symmetric(k / 40.0 * absmax, 8)));
    CHECK(got.mse == best);
    CHECK(got.mse == fake_quantize_mse(x, got.quantizer));
  }
  std::fesetround(FE_TONEAREST);
  set_num_threads(threads);
}

TEST_CASE("UniformQuantizer: symmetric narrow range and asymmetric with an exact zero") {
  const auto s = UniformQuantizer::symmetric(127.0, 8);
  CHECK(s.scale == 1.f);
  CHECK(s.qmin == -127);
  CHECK(s.qmax == 127);
  CHECK(s.quantize(2.5) == 2);  // tie → even
  CHECK(s.quantize(3.5) == 4);
  CHECK(s.quantize(300) == 127);
  CHECK(s.quantize(-300) == -127);
  CHECK(UniformQuantizer::symmetric(7.0, 4).qmax == 7);
  const auto a = UniformQuantizer::asymmetric(2.0, 5.0, 8);  // widened to [0, 5]
  CHECK(a.zero_point == 0);
  CHECK(a.fake(0.0) == 0.0);
  CHECK_THROWS_WITH_AS(UniformQuantizer::asymmetric(1.0, -1.0), doctest::Contains("ordered"), Error);
  CHECK_THROWS_AS(UniformQuantizer::symmetric(NAN), Error);
}

TEST_CASE_TEMPLATE("INT8 weights: values already on the grid are lossless", T, float, double) {
  // W = k / 32 with integers k in [−127, 127] (both ends present): the full range gives scale 1/32.
  Rng rng(1);
  auto W = Tensor<T>::empty({16, 24});
  for (int64_t i = 0; i < W.numel(); ++i) W.data()[i] = T(rng.randint(-127, 128)) / T(32);
  W.data()[0] = T(127) / T(32);
  W.data()[1] = T(-127) / T(32);
  const auto q = quantize_weight_mse(W);
  CHECK(q.clip_ratio == 1.0);
  CHECK(q.quantizer.scale == 1.f / 32);
  CHECK(q.mse == 0.0);
  CHECK(q.values.to_vector() == W.to_vector());
}

TEST_CASE_TEMPLATE("INT8 weights: MSE range search lands on the grid and minimises the error", T, float, double) {
  Rng rng(2);
  auto W = rng.normal<T>({64, 48}, T(0), T(0.05));
  W(3, 7) = T(1.5);  // an outlier makes clipping worth considering
  const auto q = quantize_weight_mse(W, 8, 100);
  const double scale = q.quantizer.scale;
  CHECK(q.quantizer.zero_point == 0);
  for (int64_t i = 0; i < W.numel(); ++i) {
    const double v = static_cast<double>(q.values.data()[i]);
    const double k = round_half_even(v / scale);
    CHECK(std::abs(k) <= 127);
    CHECK(q.values.data()[i] == static_cast<T>(k * scale));  // scale × integer, nothing else
  }
  CHECK(q.mse == doctest::Approx(fake_quantize_mse(W, q.quantizer)));
  // No candidate of the grid does better.
  for (int k = 1; k <= 100; ++k)
    CHECK(fake_quantize_mse(W, UniformQuantizer::symmetric(k / 100.0 * 1.5, 8)) >= q.mse);
  CHECK(q.clip_ratio < 1.0);  // with one outlier at 30σ, the full range wastes resolution
  // All-zero weights: scale 1, exact zeros.
  const auto z = quantize_weight_mse(Tensor<T>::zeros({4, 4}));
  CHECK(z.mse == 0.0);
  CHECK(z.values.to_vector() == std::vector<T>(16, T(0)));
  auto bad = W.clone();
  bad(0, 0) = std::numeric_limits<T>::quiet_NaN();
  CHECK_THROWS_WITH_AS(quantize_weight_mse(bad), doctest::Contains("non-finite"), Error);
}

TEST_CASE_TEMPLATE("MinMaxObserver: asymmetric activation ranges from calibration batches", T, float, double) {
  MinMaxObserver obs;
  CHECK_THROWS_WITH_AS(obs.quantizer(), doctest::Contains("no calibration batch"), Error);
  obs.observe(Tensor<T>::from({2, 2}, {T(-1), T(2), T(0.5), T(1)}));
  obs.observe(Tensor<T>::from({3}, {T(0.5), T(3), T(-0.25)}));
  CHECK(obs.batches() == 2);
  CHECK(obs.min() == -1.0);
  CHECK(obs.max() == 3.0);
  const auto q = obs.quantizer();
  CHECK(q.scale == static_cast<float>(4.0 / 255));
  CHECK(q.zero_point == 64);  // round(1 / (4/255)) = round(63.75)
  CHECK(q.qmin == 0);
  CHECK(q.qmax == 255);
  CHECK(q.fake(0.0) == 0.0);
  // Every integer level is reproduced exactly; values outside the range clamp to its ends.
  auto grid = Tensor<T>::empty({256});
  for (int k = 0; k < 256; ++k) grid(k) = static_cast<T>((k - 64) * static_cast<double>(q.scale));
  CHECK(obs.fake_quantize(grid).to_vector() == grid.to_vector());
  const auto out = obs.fake_quantize(Tensor<T>::from({2}, {T(10), T(-5)}));
  CHECK(out(0) == static_cast<T>(191 * static_cast<double>(q.scale)));
  CHECK(out(1) == static_cast<T>(-64 * static_cast<double>(q.scale)));
  // Positive-only activations still contain 0 in their range.
  MinMaxObserver pos;
  pos.observe(Tensor<T>::from({2}, {T(1), T(2)}));
  CHECK(pos.quantizer().zero_point == 0);
  CHECK(pos.min() == 1.0);
}
