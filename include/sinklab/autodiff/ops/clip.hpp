// clip(x, c): every element limited to [−c, c] (the residual-stream clipping of the Qwen outlier
// paper, §3.2, at 10 / 100 / 1000). The gradient passes where |x| ≤ c and is zero where the value
// was clipped (torch.clamp's convention, boundary included). One fused node.
#pragma once
#include <cmath>

#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/kernels/cpu/elementwise.hpp"
#include "sinklab/policy/math.hpp"

namespace sinklab::autodiff {

template <class T>
Var<T> clip(Var<T> x, double c) {
  SINKLAB_CHECK(x.defined(), "clip: undefined input");
  SINKLAB_CHECK(c > 0 && !std::isnan(c), "clip: threshold must be > 0, got ", c, " (input shape ",
                x.shape(), ")");
  const Tensor<T> xv = x.value();
  const T hi = static_cast<T>(c);
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  kernels::cpu::binary_scalar(xv.data(), hi, y.data(), xv.numel(), [](auto v, auto h) {
    return simd::vmin(simd::vmax(v, -h), h);
  });
  return x.tape->record(y, {x}, [x, xv, hi](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx = Tensor<T>::empty(xv.shape());
    kernels::cpu::binary(xv.data(), g.data(), gx.data(), xv.numel(), [hi](auto xe, auto ge) {
      using V = decltype(xe);
      using policy::math::select;
      using std::abs;
      return select(abs(xe) <= V(hi), ge, V(0));
    });
    t.accumulate(x, std::move(gx));
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> clip(Var<float>, double))

}  // namespace sinklab::autodiff
