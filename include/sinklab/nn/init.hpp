// Initialisation helpers: N(0, σ), truncated normal, uniform fan-in, constants, and PyTorch's
// module defaults as one named scheme.
//
// Init::pytorch() makes a model start exactly as one built from plain PyTorch modules would:
//   nn.Linear weight  U(−1/√fan_in, +1/√fan_in)  (kaiming_uniform_ with a = √5 gives this bound)
//   nn.Linear bias    U(−1/√fan_in, +1/√fan_in)  (same fan_in, that of the weight)
//   nn.Embedding      N(0, 1)
//   nn.LayerNorm      γ = 1, β = 0               (the norm policies use constants, not an Init)
// Why: PyTorch's defaults are what the reference code of the Bigram-Backcopy task uses, and the
// attention sink forms far faster with them than with N(0, 0.02), so reproducing its dynamics
// needs them.
//
// One mechanism covers every consumer: make_tensor() treats a 2-D tensor under Kind::PyTorch as
// a Linear weight stored [in, out] (sinklab's layout, see nn::Linear), so fan_in = shape[0]. This
// also holds for the attention's fused w_qkv [D, (H+2Hkv)·dh]: PyTorch's separate q/k/v
// Linear(D, ·) each have fan_in = D. Tables that are not Linear weights say so explicitly:
// Init::for_embedding() (token embeddings, learned positions, learnable tokens → N(0, 1)) and
// Init::for_bias(fan_in) (a Linear's bias). Any other tensor under Kind::PyTorch (1-D, 3-D, ...)
// has no fan-in make_tensor could know, and it throws naming the shape.
#pragma once
#include <cmath>
#include <type_traits>

#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::nn {

// How a weight starts. The default, N(0, 0.02), is GPT-2's and the papers' choice.
struct Init {
  enum class Kind { Normal, TruncatedNormal, Uniform, Constant, PyTorch } kind = Kind::Normal;
  double a = 0.02;  // σ for the normals, half-width for Uniform, the value for Constant; unused by PyTorch

  static Init normal(double std = 0.02) { return {Kind::Normal, std}; }
  static Init truncated_normal(double std = 0.02) { return {Kind::TruncatedNormal, std}; }
  static Init uniform(double half_width) { return {Kind::Uniform, half_width}; }
  // PyTorch's nn.Linear default scale: U(−1/√fan_in, 1/√fan_in).
  static Init fan_in(int64_t fan_in) { return {Kind::Uniform, 1.0 / std::sqrt(static_cast<double>(fan_in))}; }
  static Init constant(double v) { return {Kind::Constant, v}; }
  static Init zeros() { return constant(0.0); }
  static Init ones() { return constant(1.0); }
  // PyTorch's module defaults (see the top of this file): Linear weights [in, out] U(±1/√in).
  static Init pytorch() { return {Kind::PyTorch, 0.0}; }

  // The init of an embedding-like table [rows, dim] (nn::Embedding, pos::Learned, learnable
  // tokens, a ViT's cls/positions): PyTorch → N(0, 1), nn.Embedding's default; others unchanged.
  Init for_embedding() const { return kind == Kind::PyTorch ? normal(1.0) : *this; }
  // The init of a Linear's bias [out] whose weight has this fan_in: PyTorch → U(±1/√fan_in), as
  // nn.Linear; every other scheme starts biases at 0.
  Init for_bias(int64_t fan_in_) const { return kind == Kind::PyTorch ? fan_in(fan_in_) : zeros(); }
};

// Drawn on the host (the same values on every device), then copied to Device.
template <class T, class Device = cpu>
Tensor<T, Device> make_tensor(const Shape& shape, const Init& init, Rng& rng) {
  if constexpr (!std::is_same_v<Device, cpu>) {
    return make_tensor<T>(shape, init, rng).template to_device<Device>();
  } else {
    Tensor<T> t = Tensor<T>::empty(shape);
    switch (init.kind) {
      case Init::Kind::Normal: rng.fill_normal(t, T(0), static_cast<T>(init.a)); break;
      case Init::Kind::TruncatedNormal: rng.fill_truncated_normal(t, T(0), static_cast<T>(init.a)); break;
      case Init::Kind::Uniform: rng.fill_uniform(t, static_cast<T>(-init.a), static_cast<T>(init.a)); break;
      case Init::Kind::Constant: t.fill(static_cast<T>(init.a)); break;
      case Init::Kind::PyTorch: {
        SINKLAB_CHECK(shape.rank() == 2 && shape[0] > 0,
                      "nn::make_tensor: Init::pytorch() treats a tensor as a Linear weight [in, out] "
                      "(fan_in = shape[0]), but got shape ", shape,
                      "; use Init::for_embedding() for a table or Init::for_bias(fan_in) for a bias");
        const double bound = 1.0 / std::sqrt(static_cast<double>(shape[0]));
        rng.fill_uniform(t, static_cast<T>(-bound), static_cast<T>(bound));
        break;
      }
    }
    return t;
  }
}

}  // namespace sinklab::nn
