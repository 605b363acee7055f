// INT8 weights, symmetric per tensor, with an MSE range search (Bondarenko et al.'s W8A8 PTQ):
// candidate clipping ranges c_k = (k / K) · max|W| for k = K, K−1, …, 1; the one with the
// smallest mean squared fake-quantization error wins (ties keep the wider range).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/quant/uniform.hpp"

namespace sinklab::quant {

template <class T>
struct QuantizedWeight {
  Tensor<T> values;             // fake-quantized weight, same shape
  UniformQuantizer quantizer;   // its scale and integer range
  double clip_ratio = 1.0;      // chosen clip / max|W|
  double mse = 0.0;             // mean squared error of the chosen range
};

template <class T>
QuantizedWeight<T> quantize_weight_mse(const Tensor<T>& W, int bits = 8, int candidates = 100) {
  constexpr std::string_view fn = "quant::quantize_weight_mse";
  SINKLAB_CHECK(candidates >= 1, fn, ": need at least one candidate range, got ", candidates);
  double lo, hi;
  detail::absmax_and_range(fn, W, lo, hi);
  const double absmax = std::max(std::abs(lo), std::abs(hi));
  auto clip_ratio = [candidates](int i) { return static_cast<double>(candidates - i) / candidates; };  // i = 0: 1
  // Candidates are independent: their errors are computed in parallel (on the calling thread
  // alone under another rounding mode than to-nearest, which the workers do not share), each in
  // fake_quantize_mse's fixed order, and compared in the order above, so the choice does not
  // depend on the thread count. All candidates are one range when max|W| = 0.
  const int n = absmax == 0 ? 1 : candidates;
  auto quantizer = [&](int i) { return UniformQuantizer::symmetric(clip_ratio(i) * absmax, bits); };
  std::vector<double> mse(static_cast<std::size_t>(n));
  const Tensor<T> w = W.contiguous();
  detail::in_callers_rounding(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) mse[i] = fake_quantize_mse(w, quantizer(static_cast<int>(i)));
  });
  QuantizedWeight<T> best;
  best.mse = INFINITY;
  for (int i = 0; i < n; ++i)
    if (mse[i] < best.mse) {
      best.mse = mse[i];
      best.quantizer = quantizer(i);
      best.clip_ratio = clip_ratio(i);
    }
  best.values = fake_quantize(w, best.quantizer);
  return best;
}

}  // namespace sinklab::quant
