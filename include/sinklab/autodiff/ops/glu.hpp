// The fused gate-activation node y = act(a) ⊙ b, shared by the GLU-family FFNs (SwiGLU: act =
// act::SiLU, GLU: act::Sigmoid) and by GatedNorm's gate (σ(logits) ⊙ y). One node, one pass over
// memory forward and one backward, instead of three recorded ops.
//
//   act_mul<Act>(a, b)       a, b of equal shape [..., h]
//   act_mul_halves<Act>(ab)  ab [..., 2h] from ONE up-projection GEMM: a = ab[..., :h] (the gate
//                            half, columns 0..h−1) and b = ab[..., h:] (the linear half) → [..., h]
//   glu_mlp<Act>(x, w_up, w_down)
//                            the whole GLU feed-forward act_mul_halves(x·w_up)·w_down as one node:
//                            the activation runs in the up GEMM's row epilogue and its backward in
//                            that of the GEMM producing the hidden gradient (written in place into
//                            the gradient of ab), so neither ab nor the hidden gradient makes an
//                            extra trip through memory. Same values and gradients as the composition.
#pragma once
#include <cstdint>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/policy/activation.hpp"

namespace sinklab::autodiff {

template <act::Activation Act, class T, class D>
Var<T, D> act_mul(Var<T, D> a, Var<T, D> b) {
  SINKLAB_CHECK(a.tape == b.tape && a.tape, "act_mul<", Act::name, ">: operands come from different tapes");
  SINKLAB_CHECK(a.shape() == b.shape() && a.rank() >= 1, "act_mul<", Act::name, ">: operands must have equal shapes, got ",
                a.shape(), " and ", b.shape());
  const Tensor<T, D> av = a.value(), bv = b.value();
  const int64_t h = av.shape()[-1], rows = av.numel() / std::max<int64_t>(h, 1);
  Tensor<T, D> y = Tensor<T, D>::empty(av.shape());
  backend<D>::template act_mul_forward<Act>(av.data(), h, bv.data(), h, y.data(), h, rows, h);
  return a.tape->record(y, {a, b}, [a, b, av, bv, rows, h](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> ga, gb;
    if (a.requires_grad()) ga = Tensor<T, D>::empty(av.shape());
    if (b.requires_grad()) gb = Tensor<T, D>::empty(bv.shape());
    backend<D>::template act_mul_backward<Act>(av.data(), h, bv.data(), h, g.data(), h, ga.defined() ? ga.data() : nullptr, h,
                                   gb.defined() ? gb.data() : nullptr, h, rows, h);
    if (ga.defined()) t.accumulate(a, std::move(ga));
    if (gb.defined()) t.accumulate(b, std::move(gb));
  });
}

template <act::Activation Act, class T, class D>
Var<T, D> act_mul_halves(Var<T, D> ab) {
  SINKLAB_CHECK(ab.rank() >= 1 && ab.shape()[-1] % 2 == 0, "act_mul_halves<", Act::name,
                ">: the last axis must hold [gate | linear] halves of equal width, got shape ", ab.shape());
  const Tensor<T, D> v = ab.value();
  const int64_t w = v.shape()[-1], h = w / 2, rows = v.numel() / std::max<int64_t>(w, 1);
  Tensor<T, D> y = Tensor<T, D>::empty(v.shape().with(-1, h));
  backend<D>::template act_mul_forward<Act>(v.data(), w, v.data() + h, w, y.data(), h, rows, h);
  return ab.tape->record(y, {ab}, [ab, v, rows, h, w](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gab = Tensor<T, D>::empty(v.shape());
    backend<D>::template act_mul_backward<Act>(v.data(), w, v.data() + h, w, g.data(), h, gab.data(), w, gab.data() + h, w, rows,
                                   h);
    t.accumulate(ab, std::move(gab));
  });
}

// x [..., d] · w_up [d, 2h] → act(a) ⊙ b [..., h] · w_down [h, n] → [..., n]
template <act::Activation Act, class T, class D>
Var<T, D> glu_mlp(Var<T, D> x, Var<T, D> w_up, Var<T, D> w_down) {
  using K = backend<D>;
  using kernels::Trans;
  SINKLAB_CHECK(x.tape == w_up.tape && x.tape == w_down.tape && x.tape, "glu_mlp<", Act::name,
                ">: operands come from different tapes");
  const Tensor<T, D> xv = x.value(), wu = w_up.value(), wd = w_down.value();
  SINKLAB_CHECK(xv.rank() >= 1 && wu.rank() == 2 && wd.rank() == 2 && wu.shape()[0] == xv.shape()[-1] &&
                    wu.shape()[0] > 0 && wu.shape()[1] % 2 == 0 && wd.shape()[0] * 2 == wu.shape()[1],
                "glu_mlp<", Act::name, ">: input ", xv.shape(), ", up-projection ", wu.shape(), " and down-projection ",
                wd.shape(), " do not fit: expected [..., d], [d, 2h] and [h, n]");
  const int64_t d = wu.shape()[0], w = wu.shape()[1], h = w / 2, n = wd.shape()[1], rows = xv.numel() / d;
  Tensor<T, D> ab = Tensor<T, D>::empty(xv.shape().with(-1, w));
  Tensor<T, D> hid = Tensor<T, D>::empty(xv.shape().with(-1, h));
  const kernels::Precision p = x.tape->precision();  // of every product here, forward and backward
  K::template glu_up<Act>(xv.data(), wu.data(), rows, d, h, ab.data(), hid.data(), p);
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape().with(-1, n));
  K::gemm_at(p, Trans::N, Trans::N, rows, n, h, T(1), hid.data(), h, wd.data(), n, T(0), y.data(), n);
  return x.tape->record(y, {x, w_up, w_down}, [=](Tape<T, D>& t, const Tensor<T, D>& g) {
    bool fresh = false;  // a first contribution is written (beta 0), later ones added (beta 1)
    if (w_down.requires_grad()) {  // dW_down += hᵀ·g
      T* gwd = t.grad_buffer(w_down, fresh).data();
      K::gemm_at(p, Trans::T, Trans::N, h, n, rows, T(1), hid.data(), h, g.data(), n, fresh ? T(0) : T(1), gwd, n);
    }
    if (!x.requires_grad() && !w_up.requires_grad()) return;
    Tensor<T, D> gab = Tensor<T, D>::empty(ab.shape());  // [da | db]
    const T* const gp = gab.data();
    K::template glu_hidden_grad<Act>(g.data(), wd.data(), ab.data(), rows, n, h, gab.data(), p);
    if (x.requires_grad()) {  // dx += gab·W_upᵀ
      T* gx = t.grad_buffer(x, fresh).data();
      K::gemm_at(p, Trans::N, Trans::T, rows, d, w, T(1), gp, w, wu.data(), w, fresh ? T(0) : T(1), gx, d);
    }
    if (w_up.requires_grad()) {  // dW_up += xᵀ·gab
      T* gwu = t.grad_buffer(w_up, fresh).data();
      K::gemm_at(p, Trans::T, Trans::N, d, w, rows, T(1), xv.data(), d, gp, w, fresh ? T(0) : T(1), gwu, w);
    }
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> act_mul<act::SiLU, float>(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> act_mul<act::Sigmoid, float>(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> act_mul<act::GELU, float>(Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> act_mul_halves<act::SiLU, float>(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> act_mul_halves<act::Sigmoid, float>(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> act_mul_halves<act::GELU, float>(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> glu_mlp<act::SiLU, float>(Var<float>, Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> glu_mlp<act::Sigmoid, float>(Var<float>, Var<float>, Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> glu_mlp<act::GELU, float>(Var<float>, Var<float>, Var<float>))

}  // namespace sinklab::autodiff
