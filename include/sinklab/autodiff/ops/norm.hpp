// Normalisation ops over the last axis, each one fused tape node with a hand-written backward
// (kernels in kernels/cpu/norm.hpp):
//   rms_norm(x, gain, eps)                  y = x / √(mean(x²) + eps) ⊙ gain
//   pre_affine_rms_norm(x, pre, gain, eps)  y = RMSNorm(pre ⊙ x) ⊙ gain
//   layer_norm(x, gain, bias, eps)          y = (x − μ) / √(var + eps) ⊙ gain + bias (biased variance)
//   dyt(x, alpha, gamma, beta)              y = gamma ⊙ tanh(alpha · x) + beta, alpha of shape [1]
// The norm:: policies (nn/norm.hpp) are modules built on these.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

inline constexpr double kRmsEps = 1e-6;
inline constexpr double kLayerNormEps = 1e-5;

namespace detail {
template <class T, class D>
void check_vector(const char* op, const char* what, Var<T, D> p, int64_t n) {
  SINKLAB_CHECK(p.defined() && p.rank() == 1 && p.shape()[0] == n, op, ": ", what, " must have shape [", n, "], got ",
                p.defined() ? p.shape() : Shape{});
}
template <class T, class D>
T* data_or_null(Tensor<T, D>& t) {
  return t.defined() ? t.data() : nullptr;
}

// Fused RMSNorm of x over its last axis, with an optional pre-scale λ₁ (PreAffine).
template <class T, class D>
Var<T, D> rms_norm(Var<T, D> x, const Var<T, D>* pre, Var<T, D> gain, double eps, const char* op) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1, op, ": input must have rank >= 1");
  const Tensor<T, D> xv = x.value();
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  check_vector(op, "gain", gain, n);
  if (pre) check_vector(op, "pre-scale", *pre, n);
  SINKLAB_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  const Tensor<T, D> gv = gain.value();
  const Tensor<T, D> pv = pre ? pre->value() : Tensor<T, D>();
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  Tensor<T, D> rstd = Tensor<T, D>::empty({rows});
  backend<D>::rms_forward(xv.data(), pv.defined() ? pv.data() : nullptr, gv.data(), y.data(), rstd.data(), rows, n,
                       static_cast<T>(eps));
  auto backward = [x, gain, pvar = pre ? *pre : Var<T, D>{}, xv, gv, pv, rstd, rows, n](Tape<T, D>& t, const Tensor<T, D>& g) {
    // x's gradient is summed in the same pass (x is usually the residual stream).
    typename Tape<T, D>::GradTarget gx{nullptr, nullptr, {}};
    if (x.requires_grad()) gx = t.grad_target(x);
    T* ggain = gain.requires_grad() ? t.grad_buffer(gain).data() : nullptr;
    T* gpre = pvar.defined() && pvar.requires_grad() ? t.grad_buffer(pvar).data() : nullptr;
    backend<D>::rms_backward(xv.data(), pv.defined() ? pv.data() : nullptr, gv.data(), rstd.data(), g.data(), gx.out,
                          gx.prior, ggain, gpre, rows, n);
  };
  if (pre) return x.tape->record(y, {x, *pre, gain}, std::move(backward));
  return x.tape->record(y, {x, gain}, std::move(backward));
}
}  // namespace detail

// y = x / √(mean(x²) + eps) ⊙ gain over the last axis (one fused node).
template <class T, class D>
Var<T, D> rms_norm(Var<T, D> x, Var<T, D> gain, double eps = kRmsEps) {
  return detail::rms_norm(x, static_cast<const Var<T, D>*>(nullptr), gain, eps, "rms_norm");
}

// y = RMSNorm(pre ⊙ x) ⊙ gain (one fused node).
template <class T, class D>
Var<T, D> pre_affine_rms_norm(Var<T, D> x, Var<T, D> pre, Var<T, D> gain, double eps = kRmsEps) {
  return detail::rms_norm(x, &pre, gain, eps, "pre_affine_rms_norm");
}

// y = (x − mean) / √(var + eps) ⊙ gain + bias over the last axis (biased variance; one fused node).
template <class T, class D>
Var<T, D> layer_norm(Var<T, D> x, Var<T, D> gain, Var<T, D> bias, double eps = kLayerNormEps) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1, "layer_norm: input must have rank >= 1");
  const Tensor<T, D> xv = x.value();
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  detail::check_vector("layer_norm", "gain", gain, n);
  detail::check_vector("layer_norm", "bias", bias, n);
  SINKLAB_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got ", eps);
  const Tensor<T, D> gv = gain.value(), bv = bias.value();
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  Tensor<T, D> mean = Tensor<T, D>::empty({rows}), rstd = Tensor<T, D>::empty({rows});
  backend<D>::layer_norm_forward(xv.data(), gv.data(), bv.data(), y.data(), mean.data(), rstd.data(), rows, n,
                              static_cast<T>(eps));
  return x.tape->record(y, {x, gain, bias}, [x, gain, bias, xv, gv, mean, rstd, rows, n](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gx;
    if (x.requires_grad()) gx = Tensor<T, D>::empty(xv.shape());
    T* ggain = gain.requires_grad() ? t.grad_buffer(gain).data() : nullptr;
    T* gbias = bias.requires_grad() ? t.grad_buffer(bias).data() : nullptr;
    backend<D>::layer_norm_backward(xv.data(), gv.data(), mean.data(), rstd.data(), g.data(), detail::data_or_null(gx),
                                 ggain, gbias, rows, n);
    if (gx.defined()) t.accumulate(x, std::move(gx));
  });
}

// y = gamma ⊙ tanh(alpha · x) + beta over the last axis; alpha has shape [1] (one fused node).
template <class T, class D>
Var<T, D> dyt(Var<T, D> x, Var<T, D> alpha, Var<T, D> gamma, Var<T, D> beta) {
  SINKLAB_CHECK(x.defined() && x.rank() >= 1, "dyt: input must have rank >= 1");
  const Tensor<T, D> xv = x.value();
  const int64_t n = xv.shape()[-1], rows = xv.numel() / std::max<int64_t>(n, 1);
  detail::check_vector("dyt", "alpha", alpha, 1);
  detail::check_vector("dyt", "gamma", gamma, n);
  detail::check_vector("dyt", "beta", beta, n);
  const Tensor<T, D> gv = gamma.value();
  const T a = alpha.value().item();
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::dyt_forward(xv.data(), a, gv.data(), beta.value().data(), y.data(), rows, n);
  return x.tape->record(y, {x, alpha, gamma, beta},
                        [x, alpha, gamma, beta, xv, gv, a, rows, n](Tape<T, D>& t, const Tensor<T, D>& g) {
                          Tensor<T, D> gx;
                          if (x.requires_grad()) gx = Tensor<T, D>::empty(xv.shape());
                          T* galpha = alpha.requires_grad() ? t.grad_buffer(alpha).data() : nullptr;
                          T* ggamma = gamma.requires_grad() ? t.grad_buffer(gamma).data() : nullptr;
                          T* gbeta = beta.requires_grad() ? t.grad_buffer(beta).data() : nullptr;
                          backend<D>::dyt_backward(xv.data(), a, gv.data(), g.data(), detail::data_or_null(gx), galpha,
                                                ggamma, gbeta, rows, n);
                          if (gx.defined()) t.accumulate(x, std::move(gx));
                        });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> rms_norm(Var<float>, Var<float>, double))
SINKLAB_EXTERN_TEMPLATE(Var<float> pre_affine_rms_norm(Var<float>, Var<float>, Var<float>, double))
SINKLAB_EXTERN_TEMPLATE(Var<float> layer_norm(Var<float>, Var<float>, Var<float>, double))
SINKLAB_EXTERN_TEMPLATE(Var<float> dyt(Var<float>, Var<float>, Var<float>, Var<float>))

}  // namespace sinklab::autodiff
