// Initialisation helpers: N(0, σ), truncated normal, uniform fan-in, constants.
#pragma once
#include <cmath>

#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::nn {

// How a weight starts. The default, N(0, 0.02), is GPT-2's and the papers' choice.
struct Init {
  enum class Kind { Normal, TruncatedNormal, Uniform, Constant } kind = Kind::Normal;
  double a = 0.02;  // σ for the normals, half-width for Uniform, the value for Constant

  static Init normal(double std = 0.02) { return {Kind::Normal, std}; }
  static Init truncated_normal(double std = 0.02) { return {Kind::TruncatedNormal, std}; }
  static Init uniform(double half_width) { return {Kind::Uniform, half_width}; }
  // PyTorch's nn.Linear default scale: U(−1/√fan_in, 1/√fan_in).
  static Init fan_in(int64_t fan_in) { return {Kind::Uniform, 1.0 / std::sqrt(static_cast<double>(fan_in))}; }
  static Init constant(double v) { return {Kind::Constant, v}; }
  static Init zeros() { return constant(0.0); }
  static Init ones() { return constant(1.0); }
};

template <class T>
Tensor<T> make_tensor(const Shape& shape, const Init& init, Rng& rng) {
  Tensor<T> t = Tensor<T>::empty(shape);
  switch (init.kind) {
    case Init::Kind::Normal: rng.fill_normal(t, T(0), static_cast<T>(init.a)); break;
    case Init::Kind::TruncatedNormal: rng.fill_truncated_normal(t, T(0), static_cast<T>(init.a)); break;
    case Init::Kind::Uniform: rng.fill_uniform(t, static_cast<T>(-init.a), static_cast<T>(init.a)); break;
    case Init::Kind::Constant: t.fill(static_cast<T>(init.a)); break;
  }
  return t;
}

}  // namespace sinklab::nn
