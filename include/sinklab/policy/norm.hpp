// norm:: — normalisation policies of a block, over the last axis.
//
//   RMS             y = x / √(mean(x²) + eps) ⊙ g                        eps 1e-6, g init 1
//   LayerNorm       y = (x − μ) / √(var(x) + eps) ⊙ g + b                eps 1e-5, g = 1, b = 0
//   PreAffineRMS    y = RMS(λ₁ ⊙ x)                                       λ₁ init 1 (Qwen, §3.3)
//   GatedNorm<B,r>  y = B(x);  y′ = σ(W_up · swish(W_down · y)) ⊙ y       (Qwen, §3.4), r = 16
//   DyT             y = γ ⊙ tanh(α·x) + β, α a scalar                    α init 0.5, γ = 1, β = 0
//   GatedDyT        GatedNorm<DyT>
//
// A policy is a small struct; its module for value type T is `P::Module<T>` (nn convention:
// owns Parameters, lists them via parameters(visit), called as norm(tape, x)), built with
// (prefix, dim, rng, norm::Options). norm::module_t<P, T> names it.
//
// GatedNorm's init is not given by the paper (nor whether W_down/W_up have biases). We use no
// biases (the paper writes plain W_down, W_up, and its 3.7M-parameter count for a 2B model
// matches bias-free matrices) and N(0, 0.02) for both matrices, as Gated Attention (G1) does
// for its gate projection: the gate starts near σ(0) = 0.5 everywhere. Options::gate_init
// changes it.
//
// RMS, PreAffineRMS, LayerNorm and DyT are each one fused tape node (kernels in
// norm_kernels.hpp). The GatedNorm gate is two small GEMMs, a silu and one fused σ(·)⊙y node.
#pragma once
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/module.hpp"
#include "sinklab/policy/glu_gate.hpp"
#include "sinklab/policy/norm_kernels.hpp"

namespace sinklab::norm {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

struct Options {
  std::optional<double> eps;                         // unset: 1e-6 (RMS, PreAffineRMS), 1e-5 (LayerNorm)
  double alpha = 0.5;                                // DyT's α at init (DyT paper: 0.5; LLaMA: 0.8 attn / 0.2 ffn)
  nn::Init gate_init = nn::Init::normal(0.02);       // GatedNorm's W_down and W_up
};

inline constexpr double kRmsEps = 1e-6;
inline constexpr double kLayerNormEps = 1e-5;

namespace detail {
template <class T>
void check_last_axis(const char* kind, const std::string& name, Var<T> x, int64_t dim) {
  SINKLAB_CHECK(x.defined(), kind, " '", name, "': undefined input");
  SINKLAB_CHECK(x.rank() >= 1 && x.shape()[-1] == dim, kind, " '", name, "': input of shape ", x.shape(),
                " has last axis ", (x.rank() ? x.shape()[-1] : 0), ", expected ", dim);
}
template <class T>
void check_vector(const char* op, const char* what, Var<T> p, int64_t n) {
  SINKLAB_CHECK(p.defined() && p.rank() == 1 && p.shape()[0] == n, op, ": ", what, " must have shape [", n, "], got ",
                p.defined() ? p.shape() : Shape{});
}
template <class T>
T* data_or_null(Tensor<T>& t) {
  return t.defined() ? t.data() : nullptr;
}

// Fused RMSNorm of x over its last axis, with an optional pre-scale λ₁ (PreAffine).
template <class T>
Var<T> rms_norm(Var<T> x, const Var<T>* pre, Var<T> gain, double eps, const char* op) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1, op, ": input must have rank >= 1");
  const Tensor<T> xv = x.value();
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  check_vector(op, "gain", gain, n);
  if (pre) check_vector(op, "pre-scale", *pre, n);
  SINKLAB_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  const Tensor<T> gv = gain.value();
  const Tensor<T> pv = pre ? pre->value() : Tensor<T>();
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  Tensor<T> rstd = Tensor<T>::empty({rows});
  kernels::rms_forward(xv.data(), pv.defined() ? pv.data() : nullptr, gv.data(), y.data(), rstd.data(), rows, n,
                       static_cast<T>(eps));
  auto backward = [x, gain, pvar = pre ? *pre : Var<T>{}, xv, gv, pv, rstd, rows, n](Tape<T>& t, const Tensor<T>& g) {
    // x's gradient is summed in the same pass (x is usually the residual stream).
    typename Tape<T>::GradTarget gx{nullptr, nullptr, {}};
    if (x.requires_grad()) gx = t.grad_target(x);
    T* ggain = gain.requires_grad() ? t.grad_buffer(gain).data() : nullptr;
    T* gpre = pvar.defined() && pvar.requires_grad() ? t.grad_buffer(pvar).data() : nullptr;
    kernels::rms_backward(xv.data(), pv.defined() ? pv.data() : nullptr, gv.data(), rstd.data(), g.data(), gx.out,
                          gx.prior, ggain, gpre, rows, n);
  };
  if (pre) return x.tape->record(y, {x, *pre, gain}, std::move(backward));
  return x.tape->record(y, {x, gain}, std::move(backward));
}
}  // namespace detail

// y = x / √(mean(x²) + eps) ⊙ gain over the last axis (one fused node).
template <class T>
Var<T> rms_norm(Var<T> x, Var<T> gain, double eps = kRmsEps) {
  return detail::rms_norm(x, static_cast<const Var<T>*>(nullptr), gain, eps, "rms_norm");
}

// y = RMSNorm(pre ⊙ x) ⊙ gain (one fused node).
template <class T>
Var<T> pre_affine_rms_norm(Var<T> x, Var<T> pre, Var<T> gain, double eps = kRmsEps) {
  return detail::rms_norm(x, &pre, gain, eps, "pre_affine_rms_norm");
}

// y = (x − mean) / √(var + eps) ⊙ gain + bias over the last axis (biased variance; one fused node).
template <class T>
Var<T> layer_norm(Var<T> x, Var<T> gain, Var<T> bias, double eps = kLayerNormEps) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1, "layer_norm: input must have rank >= 1");
  const Tensor<T> xv = x.value();
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  detail::check_vector("layer_norm", "gain", gain, n);
  detail::check_vector("layer_norm", "bias", bias, n);
  SINKLAB_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got ", eps);
  const Tensor<T> gv = gain.value(), bv = bias.value();
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  Tensor<T> mean = Tensor<T>::empty({rows}), rstd = Tensor<T>::empty({rows});
  kernels::layer_norm_forward(xv.data(), gv.data(), bv.data(), y.data(), mean.data(), rstd.data(), rows, n,
                              static_cast<T>(eps));
  return x.tape->record(y, {x, gain, bias}, [x, gain, bias, xv, gv, mean, rstd, rows, n](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx;
    if (x.requires_grad()) gx = Tensor<T>::empty(xv.shape());
    T* ggain = gain.requires_grad() ? t.grad_buffer(gain).data() : nullptr;
    T* gbias = bias.requires_grad() ? t.grad_buffer(bias).data() : nullptr;
    kernels::layer_norm_backward(xv.data(), gv.data(), mean.data(), rstd.data(), g.data(), detail::data_or_null(gx),
                                 ggain, gbias, rows, n);
    if (gx.defined()) t.accumulate(x, std::move(gx));
  });
}

// y = gamma ⊙ tanh(alpha · x) + beta over the last axis; alpha has shape [1] (one fused node).
template <class T>
Var<T> dyt(Var<T> x, Var<T> alpha, Var<T> gamma, Var<T> beta) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1, "dyt: input must have rank >= 1");
  const Tensor<T> xv = x.value();
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  detail::check_vector("dyt", "alpha", alpha, 1);
  detail::check_vector("dyt", "gamma", gamma, n);
  detail::check_vector("dyt", "beta", beta, n);
  const Tensor<T> gv = gamma.value();
  const T a = alpha.value().data()[0];
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::dyt_forward(xv.data(), a, gv.data(), beta.value().data(), y.data(), rows, n);
  return x.tape->record(y, {x, alpha, gamma, beta},
                        [x, alpha, gamma, beta, xv, gv, a, rows, n](Tape<T>& t, const Tensor<T>& g) {
                          Tensor<T> gx;
                          if (x.requires_grad()) gx = Tensor<T>::empty(xv.shape());
                          T* galpha = alpha.requires_grad() ? t.grad_buffer(alpha).data() : nullptr;
                          T* ggamma = gamma.requires_grad() ? t.grad_buffer(gamma).data() : nullptr;
                          T* gbeta = beta.requires_grad() ? t.grad_buffer(beta).data() : nullptr;
                          kernels::dyt_backward(xv.data(), a, gv.data(), g.data(), detail::data_or_null(gx), galpha,
                                                ggamma, gbeta, rows, n);
                          if (gx.defined()) t.accumulate(x, std::move(gx));
                        });
}

// ---- policies ----------------------------------------------------------------------------

struct RMS {
  static constexpr const char* name = "RMS";
  template <class T>
  struct Module {
    Parameter<T> weight;  // [dim], the gain λ
    int64_t dim = 0;
    double eps = kRmsEps;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {})
        : dim(d), eps(opts.eps.value_or(kRmsEps)), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "RMS norm '", name, "': dim must be positive, got ", dim);
      weight = Parameter<T>(nn::join_name(name, "weight"), Tensor<T>::ones({dim}));
    }
    Var<T> operator()(Tape<T>& tape, Var<T> x) {
      detail::check_last_axis("RMS norm", name, x, dim);
      return rms_norm(x, tape.param(weight), eps);
    }
    template <class V>
    void parameters(V&& visit) {
      visit(weight);
    }
  };
};

struct LayerNorm {
  static constexpr const char* name = "LayerNorm";
  template <class T>
  struct Module {
    Parameter<T> weight;  // [dim]
    Parameter<T> bias;    // [dim]
    int64_t dim = 0;
    double eps = kLayerNormEps;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {})
        : dim(d), eps(opts.eps.value_or(kLayerNormEps)), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "LayerNorm '", name, "': dim must be positive, got ", dim);
      weight = Parameter<T>(nn::join_name(name, "weight"), Tensor<T>::ones({dim}));
      bias = Parameter<T>(nn::join_name(name, "bias"), Tensor<T>::zeros({dim}));
    }
    Var<T> operator()(Tape<T>& tape, Var<T> x) {
      detail::check_last_axis("LayerNorm", name, x, dim);
      return layer_norm(x, tape.param(weight), tape.param(bias), eps);
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
  template <class T>
  struct Module {
    Parameter<T> pre_weight;  // [dim], λ₁ applied before the norm
    Parameter<T> weight;      // [dim], the usual gain λ
    int64_t dim = 0;
    double eps = kRmsEps;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {})
        : dim(d), eps(opts.eps.value_or(kRmsEps)), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "PreAffineRMS norm '", name, "': dim must be positive, got ", dim);
      pre_weight = Parameter<T>(nn::join_name(name, "pre_weight"), Tensor<T>::ones({dim}));
      weight = Parameter<T>(nn::join_name(name, "weight"), Tensor<T>::ones({dim}));
    }
    Var<T> operator()(Tape<T>& tape, Var<T> x) {
      detail::check_last_axis("PreAffineRMS norm", name, x, dim);
      return pre_affine_rms_norm(x, tape.param(pre_weight), tape.param(weight), eps);
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
  template <class T>
  struct Module {
    Parameter<T> alpha;   // [1]
    Parameter<T> weight;  // [dim], γ
    Parameter<T> bias;    // [dim], β
    int64_t dim = 0;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& /*rng*/, const Options& opts = {}) : dim(d), name(std::move(prefix)) {
      SINKLAB_CHECK(dim > 0, "DyT '", name, "': dim must be positive, got ", dim);
      SINKLAB_CHECK(std::isfinite(opts.alpha), "DyT '", name, "': alpha init must be finite, got ", opts.alpha);
      alpha = Parameter<T>(nn::join_name(name, "alpha"), Tensor<T>::full({1}, static_cast<T>(opts.alpha)));
      weight = Parameter<T>(nn::join_name(name, "weight"), Tensor<T>::ones({dim}));
      bias = Parameter<T>(nn::join_name(name, "bias"), Tensor<T>::zeros({dim}));
    }
    Var<T> operator()(Tape<T>& tape, Var<T> x) {
      detail::check_last_axis("DyT", name, x, dim);
      return dyt(x, tape.param(alpha), tape.param(weight), tape.param(bias));
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

template <class P>
inline constexpr bool is_policy_v = std::is_same_v<P, RMS> || std::is_same_v<P, LayerNorm> ||
                                    std::is_same_v<P, PreAffineRMS> || std::is_same_v<P, DyT> || is_gated<P>::value;

template <class Base = RMS, int Rank = 16>
struct GatedNorm {
  static_assert(is_policy_v<Base>, "GatedNorm<Base>: Base must be a norm policy (RMS, LayerNorm, PreAffineRMS, DyT)");
  static_assert(!is_gated<Base>::value, "GatedNorm<Base>: Base is already gated; a second gate adds nothing");
  static_assert(Rank > 0, "GatedNorm<Base, Rank>: Rank must be positive");
  static constexpr const char* name = "GatedNorm";
  static constexpr int rank = Rank;
  using base_policy = Base;

  template <class T>
  struct Module {
    typename Base::template Module<T> base;
    nn::Linear<T> down;  // [dim, rank], no bias
    nn::Linear<T> up;    // [rank, dim], no bias
    int64_t dim = 0;
    std::string name;

    Module() = default;
    Module(std::string prefix, int64_t d, Rng& rng, const Options& opts = {})
        : base(prefix, d, rng, opts),
          down(nn::join_name(prefix, "gate.down"), d, Rank, rng, opts.gate_init, false),
          up(nn::join_name(prefix, "gate.up"), Rank, d, rng, opts.gate_init, false),
          dim(d),
          name(std::move(prefix)) {}

    Var<T> operator()(Tape<T>& tape, Var<T> x) {
      detail::check_last_axis("GatedNorm", name, x, dim);
      Var<T> y = base(tape, x);
      Var<T> logits = up(tape, autodiff::silu(down(tape, y)));
      return ffn::act_mul<ffn::act::Sigmoid>(logits, y);
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

template <class P, class T>
using module_t = typename P::template Module<T>;

}  // namespace sinklab::norm
