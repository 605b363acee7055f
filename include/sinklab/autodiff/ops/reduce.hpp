// Differentiable reductions: sum, mean and max over one axis or over everything.
#pragma once
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

namespace detail {
inline Shape reduced_shape(const Shape& s, int axis, bool keepdim) {
  return keepdim ? s.with(axis, 1) : s.without(axis);
}
template <class T, class D>
Var<T, D> sum_scaled(Var<T, D> x, int axis, bool keepdim, T scale) {
  const Tensor<T, D>& xv = x.value();
  const auto v = kernels::axis_view(xv.shape(), axis);
  Tensor<T, D> y = Tensor<T, D>::empty(reduced_shape(xv.shape(), axis, keepdim));
  backend<D>::sum_axis(xv.data(), y.data(), v);
  if (scale != T(1)) backend<D>::binary_scalar(y.data(), scale, y.data(), y.numel(), elem::Mul{});
  return x.tape->record(y, {x}, [x, v, scale](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::broadcast_axis_add(g.data(), t.grad_buffer(x).data(), v, scale);
  });
}
}  // namespace detail

template <class T, class D>
Var<T, D> sum(Var<T, D> x, int axis, bool keepdim = false) {
  return detail::sum_scaled(x, axis, keepdim, T(1));
}
template <class T, class D>
Var<T, D> mean(Var<T, D> x, int axis, bool keepdim = false) {
  return detail::sum_scaled(x, axis, keepdim, T(1) / static_cast<T>(x.shape()[axis]));
}
// Sum or mean of all elements, as a scalar.
template <class T, class D>
Var<T, D> sum(Var<T, D> x) {
  const Tensor<T, D>& xv = x.value();
  Tensor<T, D> y = Tensor<T, D>::scalar(backend<D>::sum_all(xv.data(), xv.numel()));
  return x.tape->record(y, {x}, [x](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D>& gx = t.grad_buffer(x);
    backend<D>::binary_scalar(gx.data(), g.item(), gx.data(), gx.numel(), elem::Add{});
  });
}
template <class T, class D>
Var<T, D> mean(Var<T, D> x) {
  const T n = static_cast<T>(x.value().numel());
  const Tensor<T, D>& xv = x.value();
  Tensor<T, D> y = Tensor<T, D>::scalar(backend<D>::sum_all(xv.data(), xv.numel()) / n);
  return x.tape->record(y, {x}, [x, n](Tape<T, D>& t, const Tensor<T, D>& g) {
    Tensor<T, D>& gx = t.grad_buffer(x);
    backend<D>::binary_scalar(gx.data(), g.item() / n, gx.data(), gx.numel(), elem::Add{});
  });
}

// Maximum over an axis; the gradient goes to the first maximal element.
template <class T, class D>
Var<T, D> max(Var<T, D> x, int axis, bool keepdim = false) {
  const Tensor<T, D>& xv = x.value();
  const auto v = kernels::axis_view(xv.shape(), axis);
  Tensor<T, D> y = Tensor<T, D>::empty(detail::reduced_shape(xv.shape(), axis, keepdim));
  Tensor<int64_t, D> arg = Tensor<int64_t, D>::empty(y.shape());
  backend<D>::max_axis(xv.data(), y.data(), arg.data(), v);
  return x.tape->record(y, {x}, [x, v, arg](Tape<T, D>& t, const Tensor<T, D>& g) {
    backend<D>::max_axis_backward(g.data(), arg.data(), t.grad_buffer(x).data(), v);
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> sum(Var<float>, int, bool))
SINKLAB_EXTERN_TEMPLATE(Var<float> mean(Var<float>, int, bool))
SINKLAB_EXTERN_TEMPLATE(Var<float> sum(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> mean(Var<float>))
SINKLAB_EXTERN_TEMPLATE(Var<float> max(Var<float>, int, bool))

}  // namespace sinklab::autodiff
