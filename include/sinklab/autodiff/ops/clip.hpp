// clip(x, c): every element limited to [−c, c] (the residual-stream clipping of the Qwen outlier
// paper, §3.2, at 10 / 100 / 1000). The gradient passes where |x| ≤ c and is zero where the value
// was clipped (torch.clamp's convention, boundary included). One fused node.
#pragma once
#include <cmath>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/policy/elementwise.hpp"

namespace sinklab::autodiff {

template <class T, class D>
Var<T, D> clip(Var<T, D> x, double c) {
  SINKLAB_CHECK(x.defined(), "clip: undefined input");
  SINKLAB_CHECK(c > 0 && !std::isnan(c), "clip: threshold must be > 0, got ", c, " (input shape ",
                x.shape(), ")");
  const Tensor<T, D> xv = x.value();
  const T hi = static_cast<T>(c);
  Tensor<T, D> y = Tensor<T, D>::empty(xv.shape());
  backend<D>::binary_scalar(xv.data(), hi, y.data(), xv.numel(), elem::Clamp{});
  return x.tape->record(y, {x}, [x, xv, hi](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D> gx = Tensor<T, D>::empty(xv.shape());
    backend<D>::binary(xv.data(), g.data(), gx.data(), xv.numel(), elem::ClampGrad<T>{hi});
    t.accumulate(x, std::move(gx));
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> clip(Var<float>, double))

}  // namespace sinklab::autodiff
