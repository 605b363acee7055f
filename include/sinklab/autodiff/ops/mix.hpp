// The anchor-mixing node of ResFormer / NuResFormer / ExoFormer (nn/mix.hpp builds the models'
// mixing on it).
#pragma once
#include <cstdint>
#include <vector>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

// How many mixing coefficients per component: one, one per head, or one per head channel.
enum class MixGranularity { Scalar, Head, Element };

// ŝ[b,h,t,c] = l1[h,c]·γ[b,t,col1]·a[b,h,t,c] + l2[h,c]·γ[b,t,col2]·s[b,h,t,c]  (one node).
// a (the anchor) and s are [B, H, T, C]; the coefficients are [1] (Scalar), [H] (Head) or
// [H, C] (Element); γ, when given, is [B, T, K]. Without s (gate logits only from the anchor)
// the second term is absent and l2 is ignored.
template <class T, class D>
Var<T, D> mix_pair(Var<T, D> anchor, Var<T, D> current, Var<T, D> l1, Var<T, D> l2, MixGranularity gran, Var<T, D> gamma = {},
                int64_t col1 = 0, int64_t col2 = 1) {
  SINKLAB_CHECK(anchor.defined() && anchor.rank() == 4, "mix_pair: anchor must be [B, heads, T, C], got ",
                anchor.defined() ? anchor.shape() : Shape{});
  const Shape shape = anchor.shape();
  const int64_t B = shape[0], H = shape[1], L = shape[2], C = shape[3];
  const bool has_s = current.defined();
  SINKLAB_CHECK(!has_s || current.shape() == shape, "mix_pair: projection of shape ", current.shape(),
                " does not match its anchor ", shape);
  const Shape want = gran == MixGranularity::Scalar ? Shape{1} : gran == MixGranularity::Head ? Shape{H} : Shape{H, C};
  SINKLAB_CHECK(l1.defined() && l1.shape() == want && (!has_s || (l2.defined() && l2.shape() == want)),
                "mix_pair: coefficients of shapes ", l1.defined() ? l1.shape() : Shape{}, " and ",
                l2.defined() ? l2.shape() : Shape{}, ", expected ", want, " for projections ", shape);
  const bool has_g = gamma.defined();
  const int64_t K = has_g ? gamma.shape()[-1] : 0;
  SINKLAB_CHECK(!has_g || (gamma.rank() == 3 && gamma.shape()[0] == B && gamma.shape()[1] == L && col1 >= 0 &&
                           col1 < K && (!has_s || (col2 >= 0 && col2 < K))),
                "mix_pair: per-token scales of shape ", has_g ? gamma.shape() : Shape{}, " with columns ", col1,
                ", ", col2, " do not fit projections ", shape);

  const Tensor<T, D> a = anchor.value();
  const Tensor<T, D> s = has_s ? current.value() : Tensor<T, D>{};
  const Tensor<T, D> c1 = l1.value();
  const Tensor<T, D> c2 = has_s ? l2.value() : Tensor<T, D>{};
  const Tensor<T, D> gm = has_g ? gamma.value() : Tensor<T, D>{};
  const int64_t ncoef = c1.numel();
  kernels::MixPair<T> m;
  m.a = a.data();
  m.s = has_s ? s.data() : nullptr;
  m.l1 = c1.data();
  m.l2 = has_s ? c2.data() : nullptr;
  m.gamma = has_g ? gm.data() : nullptr;
  m.K = K, m.col1 = col1, m.col2 = col2;
  m.B = B, m.H = H, m.L = L, m.C = C;
  m.head_stride = gran == MixGranularity::Scalar ? 0 : gran == MixGranularity::Head ? 1 : C;
  m.per_channel = gran == MixGranularity::Element;
  Tensor<T, D> y = Tensor<T, D>::empty(shape);
  backend<D>::mix_pair_forward(m, y.data());

  std::vector<Var<T, D>> inputs{anchor, l1};
  if (has_s) {
    inputs.push_back(current);
    inputs.push_back(l2);
  }
  if (has_g) inputs.push_back(gamma);
  return anchor.tape->record(y, inputs, [=](Tape<T, D>& tp, const Tensor<T, D>& dy) {
    const Tensor<T, D> keep[] = {a, s, c1, c2, gm};  // m reads them through raw pointers
    (void)keep;
    const bool want_a = anchor.requires_grad(), want_s = has_s && current.requires_grad();
    const bool want_l1 = l1.requires_grad(), want_l2 = has_s && l2.requires_grad();
    const bool want_g = has_g && gamma.requires_grad();
    // Everything is computed (the unused parts are rare: a frozen λ or a constant anchor) so that
    // the channel loop has no branches. λ gradients reduce over (b, t): each batch row sums into
    // its own slice of pl1 / pl2, added up below; γ rows are disjoint per b.
    Tensor<T, D> da = Tensor<T, D>::empty(shape);
    Tensor<T, D> ds = has_s ? Tensor<T, D>::empty(shape) : Tensor<T, D>{};
    Tensor<T, D> pl1 = Tensor<T, D>::zeros({B, ncoef});
    Tensor<T, D> pl2 = has_s ? Tensor<T, D>::zeros({B, ncoef}) : Tensor<T, D>{};
    T* dg = want_g ? tp.grad_buffer(gamma).data() : nullptr;
    backend<D>::mix_pair_backward(m, dy.data(), da.data(), has_s ? ds.data() : nullptr, pl1.data(),
                                    has_s ? pl2.data() : nullptr, dg);
    auto reduce_rows = [B, ncoef](const Tensor<T, D>& part, const Shape& out_shape) {  // Σ over b
      Tensor<T, D> out = Tensor<T, D>::empty(out_shape);
      backend<D>::sum_axis(part.data(), out.data(), kernels::AxisView{1, B, ncoef});
      return out;
    };
    if (want_l1) tp.accumulate(l1, reduce_rows(pl1, c1.shape()));
    if (want_l2) tp.accumulate(l2, reduce_rows(pl2, c2.shape()));
    if (want_a) tp.accumulate(anchor, std::move(da));
    if (want_s) tp.accumulate(current, std::move(ds));
  });
}


// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> mix_pair(Var<float>, Var<float>, Var<float>, Var<float>, MixGranularity, Var<float>,
                                         int64_t, int64_t))

}  // namespace sinklab::autodiff
