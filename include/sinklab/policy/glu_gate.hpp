// The fused gate-activation node y = act(a) ⊙ b, shared by the GLU-family FFNs (SwiGLU: act =
// silu, GLU: act = sigmoid) and by GatedNorm's gate (σ(logits) ⊙ y). One node, one pass over
// memory forward and one backward, instead of three recorded ops.
//
//   act_mul<Act>(a, b)       a, b of equal shape [..., h]
//   act_mul_halves<Act>(ab)  ab [..., 2h] from ONE up-projection GEMM: a = ab[..., :h] (the gate
//                            half, columns 0..h−1) and b = ab[..., h:] (the linear half) → [..., h]
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/policy/norm_kernels.hpp"

namespace sinklab::ffn {

// Activations as value and derivative, templates over scalar-or-batch V.
namespace act {
struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  template <class V>
  static void eval(V x, V& f, V& df) {
    using std::exp;
    using xsimd::exp;
    const V s = V(1) / (V(1) + exp(-x));
    f = s;
    df = s * (V(1) - s);
  }
};
struct Silu {
  static constexpr const char* name = "silu";
  template <class V>
  static void eval(V x, V& f, V& df) {
    using std::exp;
    using xsimd::exp;
    const V s = V(1) / (V(1) + exp(-x));
    f = x * s;
    df = s * (V(1) + x * (V(1) - s));
  }
};
// Exact (erf) GELU, as torch's default: GEGLU when used in act_mul.
struct Gelu {
  static constexpr const char* name = "gelu";
  template <class V>
  static void eval(V x, V& f, V& df) {
    using std::erf;
    using std::exp;
    using xsimd::erf;
    using xsimd::exp;
    const V cdf = V(0.5) * (V(1) + erf(x * V(0.70710678118654752440)));
    f = x * cdf;
    df = cdf + x * V(0.39894228040143267794) * exp(V(-0.5) * x * x);
  }
};
}  // namespace act

namespace kernels {
// y[r, :] = act(a[r, :]) ⊙ b[r, :] with row strides lda, ldb, ldy (elements).
template <class Act, class T>
void act_mul_forward(const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy, int64_t rows, int64_t h) {
  using namespace norm::kernels::detail;
  parallel_for(0, rows, row_grain(h), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* ar = a + r * lda;
      const T* br = b + r * ldb;
      T* yr = y + r * ldy;
      loop<T>(h, [&](auto v, int64_t i) {
        using V = decltype(v);
        V f, df;
        Act::eval(vload<V>(ar + i), f, df);
        vstore(yr + i, f * vload<V>(br + i));
      });
    }
  });
}
// ga = gy ⊙ b ⊙ act'(a), gb = gy ⊙ act(a); written (not accumulated); either may be null.
template <class Act, class T>
void act_mul_backward(const T* a, int64_t lda, const T* b, int64_t ldb, const T* gy, int64_t ldg, T* ga,
                      int64_t ldga, T* gb, int64_t ldgb, int64_t rows, int64_t h) {
  using namespace norm::kernels::detail;
  parallel_for(0, rows, row_grain(h), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* ar = a + r * lda;
      const T* br = b + r * ldb;
      const T* gr = gy + r * ldg;
      loop<T>(h, [&](auto v, int64_t i) {
        using V = decltype(v);
        V f, df;
        Act::eval(vload<V>(ar + i), f, df);
        const V g = vload<V>(gr + i);
        if (ga) vstore(ga + r * ldga + i, g * vload<V>(br + i) * df);
        if (gb) vstore(gb + r * ldgb + i, g * f);
      });
    }
  });
}
}  // namespace kernels

template <class Act, class T>
autodiff::Var<T> act_mul(autodiff::Var<T> a, autodiff::Var<T> b) {
  using autodiff::Tape;
  SINKLAB_CHECK(a.tape == b.tape && a.tape, "act_mul<", Act::name, ">: operands come from different tapes");
  SINKLAB_CHECK(a.shape() == b.shape() && a.rank() >= 1, "act_mul<", Act::name, ">: operands must have equal shapes, got ",
                a.shape(), " and ", b.shape());
  const Tensor<T> av = a.value(), bv = b.value();
  const int64_t h = av.shape()[-1], rows = av.numel() / std::max<int64_t>(h, 1);
  Tensor<T> y = Tensor<T>::empty(av.shape());
  kernels::act_mul_forward<Act>(av.data(), h, bv.data(), h, y.data(), h, rows, h);
  return a.tape->record(y, {a, b}, [a, b, av, bv, rows, h](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> ga, gb;
    if (a.requires_grad()) ga = Tensor<T>::empty(av.shape());
    if (b.requires_grad()) gb = Tensor<T>::empty(bv.shape());
    kernels::act_mul_backward<Act>(av.data(), h, bv.data(), h, g.data(), h, ga.defined() ? ga.data() : nullptr, h,
                                   gb.defined() ? gb.data() : nullptr, h, rows, h);
    if (ga.defined()) t.accumulate(a, std::move(ga));
    if (gb.defined()) t.accumulate(b, std::move(gb));
  });
}

template <class Act, class T>
autodiff::Var<T> act_mul_halves(autodiff::Var<T> ab) {
  using autodiff::Tape;
  SINKLAB_CHECK(ab.rank() >= 1 && ab.shape()[-1] % 2 == 0, "act_mul_halves<", Act::name,
                ">: the last axis must hold [gate | linear] halves of equal width, got shape ", ab.shape());
  const Tensor<T> v = ab.value();
  const int64_t w = v.shape()[-1], h = w / 2, rows = v.numel() / std::max<int64_t>(w, 1);
  Tensor<T> y = Tensor<T>::empty(v.shape().with(-1, h));
  kernels::act_mul_forward<Act>(v.data(), w, v.data() + h, w, y.data(), h, rows, h);
  return ab.tape->record(y, {ab}, [ab, v, rows, h, w](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gab = Tensor<T>::empty(v.shape());
    kernels::act_mul_backward<Act>(v.data(), w, v.data() + h, w, g.data(), h, gab.data(), w, gab.data() + h, w, rows,
                                   h);
    t.accumulate(ab, std::move(gab));
  });
}

}  // namespace sinklab::ffn
