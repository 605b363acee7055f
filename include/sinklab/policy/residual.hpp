// Residual-stream clipping (Qwen outlier paper §3.2: clip at 10 / 100 / 1000): every element of
// the stream is limited to [−c, c]; the gradient is passed where |x| ≤ c and zero where the
// value was clipped (torch.clamp's convention, boundary included).
//
//   residual::clip(x, c)            the op (one fused node)
//   residual::None / residual::Clip policies with apply(x), for blocks that take the choice as
//   a type; Clip{c} holds the threshold.
#pragma once
#include <cmath>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/simd.hpp"

namespace sinklab::residual {

template <class T>
autodiff::Var<T> clip(autodiff::Var<T> x, double c) {
  SINKLAB_CHECK(x.defined(), "residual::clip: undefined input");
  SINKLAB_CHECK(c > 0 && !std::isnan(c), "residual::clip: threshold must be > 0, got ", c, " (input shape ",
                x.shape(), ")");
  const Tensor<T> xv = x.value();
  const T hi = static_cast<T>(c);
  Tensor<T> y = Tensor<T>::empty(xv.shape());
  const T* xs = xv.data();
  T* ys = y.data();
  parallel_for(0, xv.numel(), int64_t{1} << 14, [&](int64_t lo, int64_t up) {
    simd::apply(xs + lo, ys + lo, up - lo, [hi](auto v) {
      using V = decltype(v);
      return simd::vmin(simd::vmax(v, V(-hi)), V(hi));
    });
  });
  return x.tape->record(y, {x}, [x, xv, hi](autodiff::Tape<T>& t, const Tensor<T>& g) {
    Tensor<T> gx = Tensor<T>::empty(xv.shape());
    const T* xs = xv.data();
    const T* gs = g.data();
    T* out = gx.data();
    parallel_for(0, xv.numel(), int64_t{1} << 14, [&](int64_t lo, int64_t up) {
      for (int64_t i = lo; i < up; ++i) out[i] = std::abs(xs[i]) <= hi ? gs[i] : T(0);
    });
    t.accumulate(x, std::move(gx));
  });
}

// Leaves the residual stream as it is.
struct None {
  template <class T>
  autodiff::Var<T> apply(autodiff::Var<T> x) const {
    return x;
  }
};

// Clips the residual stream at ±threshold.
struct Clip {
  double threshold = 1000.0;
  template <class T>
  autodiff::Var<T> apply(autodiff::Var<T> x) const {
    return clip(x, threshold);
  }
};

}  // namespace sinklab::residual
