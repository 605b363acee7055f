// 4-bit block fake quantization for W4A4: INT4 or FP4 E2M1 elements with one scale per block of
// `block` consecutive elements along an axis (default: the last one, 16 per block).
//
// Block scale format: fp32, absmax-based — scale = fp32(max|x_block| / grid_max) with grid_max = 7
// for INT4 (symmetric integers −7..7, no −8) and 6 for FP4 (E2M1 magnitudes {0, .5, 1, 1.5, 2, 3,
// 4, 6}). Every output element is exactly T(scale × grid point). An all-zero block gets scale 0
// and stays zero. A trailing partial block (axis length not a multiple of `block`) gets its own
// scale. Rounding: INT4 to nearest, ties to even; FP4 as in fp4.hpp.
//
// Weights: quantize along the reduction axis (K): an nn::Linear weight [in, out] = [K, N] with
// axis 0, a PyTorch-layout weight [N, K] with axis −1. Activations [.., T, K]: per-token dynamic scales are
// block = K (one scale per token row, from the data seen at run time); block = 16 gives per-token
// block scales (NVFP4/MXFP4 style). Scales are returned as [rows, blocks] where rows run over the
// other axes in order.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/quant/fp4.hpp"
#include "sinklab/quant/rounding.hpp"

namespace sinklab::quant {

enum class Format4 { int4, fp4_e2m1 };

inline constexpr double grid_max(Format4 f) { return f == Format4::int4 ? 7.0 : kE2M1Max; }

// Nearest grid point of a value already divided by its scale.
inline double round_to_grid(Format4 f, double v) {
  if (f == Format4::fp4_e2m1) return round_to_e2m1(v);
  return std::clamp(round_half_even(v), -7.0, 7.0);
}

template <class T>
struct BlockQuantized {
  Tensor<T> values;      // fake-quantized, same shape as the input (contiguous)
  Tensor<float> scales;  // [rows, blocks]
  Format4 format = Format4::fp4_e2m1;
  int64_t block = 0;
  int axis = -1;
};

template <class T>
BlockQuantized<T> block_fake_quantize(const Tensor<T>& x, Format4 format, int64_t block = 16, int axis = -1) {
  constexpr std::string_view fn = "quant::block_fake_quantize";
  SINKLAB_CHECK(x.defined() && x.rank() >= 1 && x.numel() > 0, fn, ": expected a non-empty tensor, got ",
                x.defined() ? x.shape().str() : std::string("undefined"));
  SINKLAB_CHECK(block >= 1, fn, ": block size must be >= 1, got ", block);
  axis = x.shape().normalize(axis);
  // Move the blocked axis last, quantize rows, move it back.
  const int last = x.rank() - 1;
  const Tensor<T> src = x.transpose(axis, last).contiguous();
  const int64_t K = src.size(last), rows = src.numel() / K, nblocks = (K + block - 1) / block;
  Tensor<T> dst = Tensor<T>::empty(src.shape());
  Tensor<float> scales = Tensor<float>::empty({rows, nblocks});
  const double gmax = grid_max(format);
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = src.data() + r * K;
    T* out = dst.data() + r * K;
    for (int64_t nb = 0; nb < nblocks; ++nb) {
      const int64_t b0 = nb * block, b1 = std::min(K, b0 + block);
      double amax = 0;
      for (int64_t k = b0; k < b1; ++k) {
        const double v = static_cast<double>(in[k]);
        SINKLAB_CHECK(std::isfinite(v), fn, ": non-finite value ", v, " in a tensor of shape ", x.shape());
        amax = std::max(amax, std::abs(v));
      }
      const float scale = static_cast<float>(amax / gmax);
      scales(r, nb) = scale;
      for (int64_t k = b0; k < b1; ++k) {
        const double g = scale > 0 ? round_to_grid(format, static_cast<double>(in[k]) / scale) : 0.0;
        out[k] = static_cast<T>(g * static_cast<double>(scale));
      }
    }
  }
  BlockQuantized<T> result;
  result.values = dst.transpose(axis, last).contiguous();
  result.scales = scales;
  result.format = format;
  result.block = block;
  result.axis = axis;
  return result;
}

// Per-token dynamic scales for activations [..., K]: one scale per row of the last axis.
template <class T>
BlockQuantized<T> per_token_fake_quantize(const Tensor<T>& x, Format4 format) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1 && x.numel() > 0, "quant::per_token_fake_quantize: expected a non-empty tensor");
  return block_fake_quantize(x, format, x.size(-1), -1);
}

}  // namespace sinklab::quant
