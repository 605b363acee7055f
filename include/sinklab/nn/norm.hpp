// norm:: — normalisation policies of a block, over the last axis.
//
//   RMS             y = x / √(mean(x²) + eps) ⊙ g                        eps 1e-6, g init 1
//   LayerNorm       y = (x − μ) / √(var(x) + eps) ⊙ g + b                eps 1e-5, g = 1, b = 0
//   PreAffineRMS    y = RMS(λ₁ ⊙ x)                                       λ₁ init 1 (Qwen, §3.3)
//   GatedNorm<B,r>  y = B(x);  y′ = σ(W_up · swish(W_down · y)) ⊙ y       (Qwen, §3.4), r = 16
//   DyT             y = γ ⊙ tanh(α·x) + β, α a scalar                    α init 0.5, γ = 1, β = 0
//   GatedDyT        GatedNorm<DyT>
//
// A policy is a small struct; its module for value type T is `P::Module<T, Device>` (nn convention:
// owns Parameters, lists them via parameters(visit), called as norm(tape, x)), built with
// (prefix, dim, rng, norm::Options). norm::module_t<P, T, Device> names it.
//
// GatedNorm's init is not given by the paper (nor whether W_down/W_up have biases). We use no
// biases (the paper writes plain W_down, W_up, and its 3.7M-parameter count for a 2B model
// matches bias-free matrices) and N(0, 0.02) for both matrices, as Gated Attention (G1) does
// for its gate projection: the gate starts near σ(0) = 0.5 everywhere. Options::gate_init
// changes it.
//
// RMS, PreAffineRMS, LayerNorm and DyT are each one fused tape node (autodiff/ops/norm.hpp).
// The GatedNorm gate is two small GEMMs, a silu and one fused σ(·)⊙y node.
#pragma once
#include <cmath>
#include <concepts>
#include <optional>
#include <string>
#include <type_traits>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/glu.hpp"
#include "sinklab/autodiff/ops/norm.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/module.hpp"

namespace sinklab::norm {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

struct Options {
  std::optional<double> eps;                         // unset: 1e-6 (RMS, PreAffineRMS), 1e-5 (LayerNorm)
  double alpha = 0.5;                                // DyT's α at init (DyT paper: 0.5; LLaMA: 0.8 attn / 0.2 ffn)
  nn::Init gate_init = nn::Init::normal(0.02);       // GatedNorm's W_down and W_up
};

namespace detail {
template <class T, class Device = cpu>
void check_last_axis(const char* kind, const std::string& name, Var<T, Device> x, int64_t dim) {
  SINKLAB_CHECK(x.defined(), kind, " '", name, "': undefined input");
  SINKLAB_CHECK(x.rank() >= 1 && x.shape()[-1] == dim, kind, " '", name, "': input of shape ", x.shape(),
                " has last axis ", (x.rank() ? x.shape()[-1] : 0), ", expected ", dim);
}
}  // namespace detail

// ---- policies ----------------------------------------------------------------------------

struct RMS {
  static constexpr const char* name = "RMS";
  template <class T, class Device = cpu>
  struct Module {
    Parameter<T, Device> weight;  // [dim], the gain λ
    int64_t dim = 0;
    double eps = autodiff::kRmsEps;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {})
        : dim(d), eps(opts.eps.value_or(autodiff::kRmsEps)), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "RMS norm '", name, "': dim must be positive, got ", dim);
      weight = Parameter<T, Device>(nn::join_name(name, "weight"), Tensor<T, Device>::ones({dim}));
    }
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_last_axis("RMS norm", name, x, dim);
      return autodiff::rms_norm(x, tape.param(weight), eps);
    }
    template <class V>
    void parameters(V&& visit) {
      visit(weight);
    }
  };
};

struct LayerNorm {
  static constexpr const char* name = "LayerNorm";
  template <class T, class Device = cpu>
  struct Module {
    Parameter<T, Device> weight;  // [dim]
    Parameter<T, Device> bias;    // [dim]
    int64_t dim = 0;
    double eps = autodiff::kLayerNormEps;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {})
        : dim(d), eps(opts.eps.value_or(autodiff::kLayerNormEps)), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "LayerNorm '", name, "': dim must be positive, got ", dim);
      weight = Parameter<T, Device>(nn::join_name(name, "weight"), Tensor<T, Device>::ones({dim}));
      bias = Parameter<T, Device>(nn::join_name(name, "bias"), Tensor<T, Device>::zeros({dim}));
    }
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_last_axis("LayerNorm", name, x, dim);
      return autodiff::layer_norm(x, tape.param(weight), tape.param(bias), eps);
    }
    template <class V>
    void parameters(V&& visit) {
      visit(weight);
      visit(bias);
    }
  };
};

struct PreAffineRMS {
  static constexpr const char* name = "PreAffineRMS";
  template <class T, class Device = cpu>
  struct Module {
    Parameter<T, Device> pre_weight;  // [dim], λ₁ applied before the norm
    Parameter<T, Device> weight;      // [dim], the usual gain λ
    int64_t dim = 0;
    double eps = autodiff::kRmsEps;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {})
        : dim(d), eps(opts.eps.value_or(autodiff::kRmsEps)), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "PreAffineRMS norm '", name, "': dim must be positive, got ", dim);
      pre_weight = Parameter<T, Device>(nn::join_name(name, "pre_weight"), Tensor<T, Device>::ones({dim}));
      weight = Parameter<T, Device>(nn::join_name(name, "weight"), Tensor<T, Device>::ones({dim}));
    }
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_last_axis("PreAffineRMS norm", name, x, dim);
      return autodiff::pre_affine_rms_norm(x, tape.param(pre_weight), tape.param(weight), eps);
    }
    template <class V>
    void parameters(V&& visit) {
      visit(pre_weight);
      visit(weight);
    }
  };
};

struct DyT {
  static constexpr const char* name = "DyT";
  template <class T, class Device = cpu>
  struct Module {
    Parameter<T, Device> alpha;   // [1]
    Parameter<T, Device> weight;  // [dim], γ
    Parameter<T, Device> bias;    // [dim], β
    int64_t dim = 0;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {}) : dim(d), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "DyT '", name, "': dim must be positive, got ", dim);
      SINKLAB_CHECK(std::isfinite(opts.alpha), "DyT '", name, "': alpha init must be finite, got ", opts.alpha);
      alpha =
          Parameter<T, Device>(nn::join_name(name, "alpha"), Tensor<T, Device>::full({1}, static_cast<T>(opts.alpha)));
      weight = Parameter<T, Device>(nn::join_name(name, "weight"), Tensor<T, Device>::ones({dim}));
      bias = Parameter<T, Device>(nn::join_name(name, "bias"), Tensor<T, Device>::zeros({dim}));
    }
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_last_axis("DyT", name, x, dim);
      return autodiff::dyt(x, tape.param(alpha), tape.param(weight), tape.param(bias));
    }
    template <class V>
    void parameters(V&& visit) {
      visit(alpha);
      visit(weight);
      visit(bias);
    }
  };
};

template <class P>
struct is_gated : std::false_type {};

// What a norm policy provides: a name and, per value type T, a Module<T, Device> built from (prefix,
// dim, rng, norm::Options), called as norm(tape, x) on [..., dim] and listing its parameters.
// A user's norm is any struct like that (docs/extending.md); it serves as a block norm and as
// the attention's QK-norm.
template <class P>
concept Policy = nn::BranchPolicy<P, Options>;

template <class P>
inline constexpr bool is_policy_v = Policy<P>;

template <class Base = RMS, int Rank = 16>
struct GatedNorm {
  static_assert(is_policy_v<Base>, "GatedNorm<Base>: Base must be a norm policy (RMS, LayerNorm, PreAffineRMS, DyT, or "
                                   "a struct satisfying norm::Policy)");
  static_assert(!is_gated<Base>::value, "GatedNorm<Base>: Base is already gated; a second gate adds nothing");
  static_assert(Rank > 0, "GatedNorm<Base, Rank>: Rank must be positive");
  static constexpr const char* name = "GatedNorm";
  static constexpr int rank = Rank;
  using base_policy = Base;

  template <class T, class Device = cpu>
  struct Module {
    nn::module_t<Base, T, Device> base;
    nn::Linear<T, Device> down;  // [dim, rank], no bias
    nn::Linear<T, Device> up;    // [rank, dim], no bias
    int64_t dim = 0;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& opts = {})
        : base(prefix, d, rng, opts),
          down(nn::join_name(prefix, "gate.down"), d, Rank, rng, opts.gate_init, false),
          up(nn::join_name(prefix, "gate.up"), Rank, d, rng, opts.gate_init, false),
          dim(d),
          name(std::move(prefix)) {}

    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) {
      detail::check_last_axis("GatedNorm", name, x, dim);
      Var<T, Device> y = base(tape, x);
      Var<T, Device> logits = up(tape, autodiff::silu(down(tape, y)));
      return autodiff::act_mul<act::Sigmoid>(logits, y);
    }
    template <class V>
    void parameters(V&& visit) {
      base.parameters(visit);
      down.parameters(visit);
      up.parameters(visit);
    }
  };
};
template <class B, int R>
struct is_gated<GatedNorm<B, R>> : std::true_type {};

using GatedDyT = GatedNorm<DyT>;

template <class P, class T, class Device = cpu>
using module_t = nn::module_t<P, T, Device>;

}  // namespace sinklab::norm
