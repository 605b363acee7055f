// INT8 weights, symmetric per tensor, with an MSE range search (Bondarenko et al.'s W8A8 PTQ):
// candidate clipping ranges c_k = (k / K) · max|W| for k = K, K−1, …, 1; the one with the
// smallest mean squared fake-quantization error wins (ties keep the wider range).
#pragma once
#include <cmath>
#include <cstdint>

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
  QuantizedWeight<T> best;
  best.mse = INFINITY;
  for (int k = candidates; k >= 1; --k) {
    const double ratio = static_cast<double>(k) / candidates;
    const UniformQuantizer q = UniformQuantizer::symmetric(ratio * absmax, bits);
    const double mse = fake_quantize_mse(W, q);
    if (mse < best.mse) {
      best.mse = mse;
      best.quantizer = q;
      best.clip_ratio = ratio;
    }
    if (absmax == 0) break;  // every candidate is the same
  }
  best.values = fake_quantize(W, best.quantizer);
  return best;
}

}  // namespace sinklab::quant
