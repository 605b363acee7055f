// Differentiable reductions: sum, mean and max over one axis or over everything.
#pragma once
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/kernels/cpu/reduce.hpp"

namespace sinklab::autodiff {

namespace detail {
inline Shape reduced_shape(const Shape& s, int axis, bool keepdim) {
  return keepdim ? s.with(axis, 1) : s.without(axis);
}
// gx[o, k, i] += scale · g[o, i] for every k.
template <class T>
void broadcast_axis_add(const T* g, T* gx, kernels::cpu::AxisView v, T scale) {
  parallel_for(0, v.outer, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t k = 0; k < v.n; ++k) {
        T* dst = gx + (o * v.n + k) * v.inner;
        const T* src = g + o * v.inner;
        for (int64_t i = 0; i < v.inner; ++i) dst[i] += scale * src[i];
      }
  });
}
template <class T>
Var<T> sum_scaled(Var<T> x, int axis, bool keepdim, T scale) {
  const Tensor<T>& xv = x.value();
  const auto v = kernels::cpu::axis_view(xv.shape(), axis);
  Tensor<T> y = Tensor<T>::empty(reduced_shape(xv.shape(), axis, keepdim));
  kernels::cpu::sum_axis(xv.data(), y.data(), v);
  if (scale != T(1)) kernels::cpu::binary_scalar(y.data(), scale, y.data(), y.numel(), kernels::cpu::fn::Mul{});
  return x.tape->record(y, {x}, [x, v, scale](Tape<T>& t, const Tensor<T>& g) {
    broadcast_axis_add(g.data(), t.grad_buffer(x).data(), v, scale);
  });
}
}  // namespace detail

template <class T>
Var<T> sum(Var<T> x, int axis, bool keepdim = false) {
  return detail::sum_scaled(x, axis, keepdim, T(1));
}
template <class T>
Var<T> mean(Var<T> x, int axis, bool keepdim = false) {
  return detail::sum_scaled(x, axis, keepdim, T(1) / static_cast<T>(x.shape()[axis]));
}
// Sum or mean of all elements, as a scalar.
template <class T>
Var<T> sum(Var<T> x) {
  const Tensor<T>& xv = x.value();
  Tensor<T> y = Tensor<T>::scalar(simd::sum(xv.data(), xv.numel()));
  return x.tape->record(y, {x}, [x](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T>& gx = t.grad_buffer(x);
    kernels::cpu::binary_scalar(gx.data(), g.item(), gx.data(), gx.numel(), kernels::cpu::fn::Add{});
  });
}
template <class T>
Var<T> mean(Var<T> x) {
  const T n = static_cast<T>(x.value().numel());
  const Tensor<T>& xv = x.value();
  Tensor<T> y = Tensor<T>::scalar(simd::sum(xv.data(), xv.numel()) / n);
  return x.tape->record(y, {x}, [x, n](Tape<T>& t, const Tensor<T>& g) {
    Tensor<T>& gx = t.grad_buffer(x);
    kernels::cpu::binary_scalar(gx.data(), g.item() / n, gx.data(), gx.numel(), kernels::cpu::fn::Add{});
  });
}

// Maximum over an axis; the gradient goes to the first maximal element.
template <class T>
Var<T> max(Var<T> x, int axis, bool keepdim = false) {
  const Tensor<T>& xv = x.value();
  const auto v = kernels::cpu::axis_view(xv.shape(), axis);
  Tensor<T> y = Tensor<T>::empty(detail::reduced_shape(xv.shape(), axis, keepdim));
  auto arg = std::make_shared<std::vector<int64_t>>(static_cast<std::size_t>(y.numel()));
  kernels::cpu::max_axis(xv.data(), y.data(), arg->data(), v);
  return x.tape->record(y, {x}, [x, v, arg](Tape<T>& t, const Tensor<T>& g) {
    T* gx = t.grad_buffer(x).data();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        const int64_t r = o * v.inner + i;
        gx[(o * v.n + (*arg)[r]) * v.inner + i] += g.data()[r];
      }
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> sum(Var<float>, int, bool))
SINKLAB_EXTERN_TEMPLATE(Var<float> mean(Var<float>, int, bool))
SINKLAB_EXTERN_TEMPLATE(Var<float> sum(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> mean(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> max(Var<float>, int, bool))

}  // namespace sinklab::autodiff
