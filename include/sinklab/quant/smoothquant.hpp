// SmoothQuant (Xiao et al. 2023): migrate activation outliers into the weights with a per input
// channel factor s_j = max|X_j|^α / max|W_j|^(1−α) (α = 0.5 by default), X' = X diag(s)⁻¹,
// W' = diag(s) W, so X'·W' = X·W in exact arithmetic.
//
// Layout: X [N, C] (rows are tokens; any leading axes are flattened), W [C, M] in the y·W
// convention (a PyTorch-layout weight [M, C] is passed as W.transpose(0, 1)). A channel whose
// activation or weight maximum is 0 gets s_j = 1 (nothing to migrate), and s_j is floored at
// 1e-5 as in the reference implementation, so no channel is divided by zero. Activation maxima
// over several calibration batches come from probe::DimensionMaxAbs (its values() feed
// smoothing_scales directly); smooth(X, W) uses the one batch X.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::quant {

inline std::vector<double> smoothing_scales(const std::vector<double>& act_absmax, const std::vector<double>& weight_absmax,
                                            double alpha = 0.5) {
  constexpr std::string_view fn = "quant::smoothing_scales";
  SINKLAB_CHECK(act_absmax.size() == weight_absmax.size(), fn, ": ", act_absmax.size(), " activation channels vs ",
                weight_absmax.size(), " weight input channels");
  SINKLAB_CHECK(alpha >= 0 && alpha <= 1, fn, ": alpha must be in [0, 1], got ", alpha);
  std::vector<double> s(act_absmax.size(), 1.0);
  for (std::size_t j = 0; j < s.size(); ++j) {
    const double a = act_absmax[j], w = weight_absmax[j];
    SINKLAB_CHECK(std::isfinite(a) && std::isfinite(w) && a >= 0 && w >= 0, fn, ": channel ", j,
                  " has invalid maxima (activation ", a, ", weight ", w, ")");
    if (a > 0 && w > 0) s[j] = std::max(std::pow(a, alpha) / std::pow(w, 1 - alpha), 1e-5);
  }
  return s;
}

// max|X_j| over rows of X [..., C] and max|W_j| over the output columns of W [C, M].
template <class T>
std::vector<double> channel_absmax(const Tensor<T>& X) {
  SINKLAB_CHECK(X.defined() && X.rank() >= 1 && X.numel() > 0, "quant::channel_absmax: expected a non-empty [..., C] tensor");
  const Tensor<T> c = X.contiguous();
  const int64_t C = c.size(-1), rows = c.numel() / C;
  std::vector<double> m(static_cast<std::size_t>(C), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < C; ++j) m[j] = std::max(m[j], std::abs(static_cast<double>(c.data()[r * C + j])));
  return m;
}
template <class T>
std::vector<double> weight_input_absmax(const Tensor<T>& W) {
  SINKLAB_CHECK(W.defined() && W.rank() == 2, "quant::weight_input_absmax: expected W [C, M] (y·W convention), got ",
                W.defined() ? W.shape().str() : std::string("undefined"));
  return channel_absmax(W.transpose(0, 1));
}

template <class T>
struct SmoothedPair {
  Tensor<T> X;                 // X diag(s)⁻¹
  Tensor<T> W;                 // diag(s) W
  std::vector<double> scales;  // s
};

namespace detail {
template <class T>
void require_pair(std::string_view fn, const Tensor<T>& X, const Tensor<T>& W, std::size_t scales) {
  SINKLAB_CHECK(X.defined() && X.rank() >= 1 && W.defined() && W.rank() == 2, fn,
                ": expected X [..., C] and W [C, M], got ", X.defined() ? X.shape().str() : std::string("undefined"),
                " and ", W.defined() ? W.shape().str() : std::string("undefined"));
  SINKLAB_CHECK(W.size(0) == X.size(-1) && scales == static_cast<std::size_t>(X.size(-1)), fn, ": X ", X.shape(),
                ", W ", W.shape(), " and ", scales,
                " scales do not agree on the channel count (W is [C, M] in the y·W convention; pass a "
                "PyTorch-layout weight as W.transpose(0, 1))");
}
}  // namespace detail

// Applies given scales: divides column j of X and multiplies row j of W by s_j.
template <class T>
SmoothedPair<T> apply_smoothing(const Tensor<T>& X, const Tensor<T>& W, const std::vector<double>& s) {
  detail::require_pair("quant::apply_smoothing", X, W, s.size());
  const int64_t C = X.size(-1), M = W.size(1);
  SmoothedPair<T> out{X.clone(), W.clone(), s};
  const int64_t rows = out.X.numel() / C;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < C; ++j) {
      T& v = out.X.data()[r * C + j];
      v = static_cast<T>(static_cast<double>(v) / s[j]);
    }
  for (int64_t j = 0; j < C; ++j)
    for (int64_t m = 0; m < M; ++m) {
      T& v = out.W.data()[j * M + m];
      v = static_cast<T>(static_cast<double>(v) * s[j]);
    }
  return out;
}

// Computes s from the pair itself (one calibration batch) and applies it.
template <class T>
SmoothedPair<T> smooth(const Tensor<T>& X, const Tensor<T>& W, double alpha = 0.5) {
  detail::require_pair("quant::smooth", X, W, X.defined() && X.rank() >= 1 ? static_cast<std::size_t>(X.size(-1)) : 0);
  return apply_smoothing(X, W, smoothing_scales(channel_absmax(X), weight_input_absmax(W), alpha));
}

}  // namespace sinklab::quant
